"""Growing running elastic jobs into GPUs nobody waits for.

Any policy decides pending jobs; ``GrowRunning`` wraps one and adds, for running jobs that
opted in to checkpoint-and-requeue (``green:elastic=requeue``), a larger GPU count when
that is plainly worth a restart (the controller enacts it: ``controller/resize.py``):

* **nobody waits**: the queue is empty (no job pending, eligible, deferred or held), so
  the GPUs a growing job takes are GPUs no job in the queue could use; a job arriving later
  may wait for it, as for any running job: hence the next two bounds;
* **it pays**: the job's remaining time (its time limit less what it ran, all that Slurm
  knows) at the new count plus ``restart_cost_s`` (checkpoint, requeue, Slurm's restart
  delay, reloading) is at most ``1 - min_gain`` of the remaining time at its count;
* **it costs little energy**: the models' energy for the remaining work grows by at most
  ``energy_slack`` (the GPU-hours bound GreenFlow's guards put on pending jobs).

Only single-node jobs grow, within their node's free GPUs and the user's ``gpus=``
range, so the restart fits where the job runs now. Shrinking a running job (when carbon
is dear, or for a job waiting behind it) is not decided yet.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from slurm_green.core.cluster import ClusterSnapshot, Job, JobState
from slurm_green.core.decision import DecisionContext
from slurm_green.core.green_options import parse_marker
from slurm_green.core.models import Config, energy_per_work_j
from slurm_green.core.plan import JobDecision, Plan, Policy


@dataclass(frozen=True)
class GrowRunning:
    inner: Policy
    restart_cost_s: float = 300.0
    min_gain: float = 0.1
    energy_slack: float = 0.1

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def budget_fraction(self) -> float | None:
        """The wrapped policy's budget (the controller's period budget paces it)."""
        return getattr(self.inner, "budget_fraction", None)

    def __call__(self, context: DecisionContext) -> Plan:
        plan = self.inner(context)
        if _someone_waits(context.snapshot):
            return plan
        free = {node.name: node.gpus_free for node in context.snapshot.nodes}
        grown = []
        for job in context.snapshot.jobs:
            decision = self._grow(job, free, context)
            if decision is not None:
                grown.append(decision)
                free[job.nodes[0]] -= (decision.gpus_per_node or 0) - job.gpus_per_node
        return replace(plan, decisions=(*plan.decisions, *grown)) if grown else plan

    def _grow(self, job: Job, free: dict[str, int], context: DecisionContext) -> JobDecision | None:
        options = parse_marker(job.admin_comment)
        if (job.state is not JobState.RUNNING or options is None or not options.managed or not options.elastic
                or job.num_nodes != 1 or len(job.nodes) != 1 or job.gpus_per_node < 1
                or job.start_time is None or not job.time_limit_s):
            return None
        left_s = job.start_time + job.time_limit_s - context.now
        if left_s <= self.restart_cost_s:
            return None
        high = min(options.gpus_max or job.gpus_per_node, job.gpus_per_node + free.get(job.nodes[0], 0))
        model = context.models.for_job(job.name, job.gpu_type)
        now_config = Config(job.gpus_per_node)
        for gpus in range(high, job.gpus_per_node, -1):  # the most GPUs that pays
            config = Config(gpus)
            runtime = left_s * model.throughput(now_config) / model.throughput(config)
            energy = energy_per_work_j(model, config) / energy_per_work_j(model, now_config)
            if runtime + self.restart_cost_s <= (1 - self.min_gain) * left_s and energy <= 1 + self.energy_slack:
                return JobDecision(job.job_id, gpus_per_node=gpus, num_nodes=1, expected_runtime_s=runtime,
                                   reason=f"grow running job {job.gpus_per_node} -> {gpus} GPUs: idle GPUs no "
                                          f"pending job waits for; about {left_s / 3600:.1f} h left -> "
                                          f"{(runtime + self.restart_cost_s) / 3600:.1f} h with the restart, "
                                          f"energy x{energy:.2f}")
        return None


def _someone_waits(snapshot: ClusterSnapshot) -> bool:
    """Any pending job at all: one eligible now, one deferred (for carbon, or to its
    ``--begin``) that would find its GPUs taken when it is released, one held (a job
    requeued for its own resize must find room when it is released)."""
    return any(job.state is JobState.PENDING for job in snapshot.jobs)
