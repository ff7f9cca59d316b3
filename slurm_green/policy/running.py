"""Growing running elastic jobs into GPUs nobody waits for.

Any policy decides pending jobs; ``GrowRunning`` wraps one and adds, for running jobs that
opted in to checkpoint-and-requeue (``green:elastic=requeue``), a larger GPU count when
that is plainly worth a restart (the controller enacts it: ``controller/resize.py``):

* **nobody waits**: the queue is empty (no job pending, eligible, deferred or held), so
  the GPUs a growing job takes are GPUs no job in the queue could use; a job arriving later
  may wait for it, as for any running job: hence the next two bounds;
* **it pays**: the job's remaining time (its time limit less what it ran, all that Slurm
  knows, or less where the job's own progress report says so: ``_time_left``) at the new
  count plus ``restart_cost_s`` (checkpoint, requeue, Slurm's restart delay, reloading) is
  at most ``1 - min_gain`` of the remaining time at its count;
* **it costs little energy**: the models' energy for the remaining work grows by at most
  ``energy_slack`` (the GPU-hours bound GreenFlow's guards put on pending jobs).

Only single-node jobs grow, within their node's free GPUs and the user's ``gpus=``
range, so the restart fits where the job runs now.

``ShrinkRunning`` is the other direction, for the job at the head of the queue: when the
oldest job that wants to start now (eligible, or started now by the wrapped policy's plan)
fits on no node, and a running elastic job on one node could give it the GPUs it lacks
while keeping at least the user's minimum, that job is shrunk when the queued job's wait
saved is at least ``min_ratio`` times what the shrink costs (the shrunk job's longer
remaining time plus ``restart_cost_s``; the queued job's wait shortened by the restart
too). The queued job's wait is read from the running jobs' time limits (never from their
users' reports), the shrunk job's time left as for growing. One shrink per tick; the
resizer's bounds (attempts, interval, one shrink in flight) hold.

``ShrinkWhenDear`` shrinks for carbon (energy, under PowerFlow), GreenFlow's reallocation
with the grid: the wrapped plan's price (``Plan.prices``: the seconds of JCT a kg CO2 or a
kWh was worth to the budget at this tick) weighs a running elastic job's remaining carbon
at a smaller count, over the forecast of the hours it would run then, against the time it
loses and the restart. It shrinks (at most one job a tick, and none when another resize
is decided) when the priced saving exceeds that loss by ``min_gain`` of the job's time
left, so one intensity cannot justify a shrink and then a grow back. With no budget
binding (price 0), without a forecast, or with nothing pending (the policy then priced
nothing) no job is shrunk for carbon.

**Layer-aware (IceFrog)**: both rate a job at a GPU count by its effective progress at the
frozen share its helper reports (``models.freezing.effective_rate``). Freezing shortens a
step's compute, not its synchronisation, so a frozen job gains less from GPUs it would get
and loses less from GPUs it would give up: it is grown later and shrunk sooner, and the
queue's head gets GPUs that do more for it. A report's frozen share can only work against
its own job (a larger one makes every GPU count above its own look less worth, below it
less of a loss), like its time left. ``icefrog`` (``policy/registry.py``) is GreenFlow with
both.

**Measured scaling**: a job that ran at two GPU counts (it was resized) is rated by how its
reports say it scaled between them (``models/measured.py``), where that is worse than its
model says; again only ever against its own job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from slurm_green.core.cluster import ClusterSnapshot, Job, JobState
from slurm_green.core.decision import DecisionContext
from slurm_green.core.green_options import GreenOptions, parse_marker
from slurm_green.core.models import Config, JobModel
from slurm_green.core.plan import JobDecision, Plan, Policy, Price
from slurm_green.models.freezing import effective_rate, frozen_power_w
from slurm_green.models.measured import MeasuredScaling, corrected
from slurm_green.policy.gpu_types import running_gpu_type


#: What a checkpoint, requeue and restart costs a job unless the site says (``[elastic] restart_cost_s``).
RESTART_COST_S = 300.0


@dataclass(frozen=True)
class _Wrapping:
    """A policy that adds running-job decisions to the plan of the policy it wraps, under
    that policy's name and budget."""

    inner: Policy
    restart_cost_s: float = RESTART_COST_S
    #: The name it goes by when it is a named policy of its own (``icefrog``), else the wrapped one's.
    label: str | None = None
    #: Rate jobs at the frozen share their reports give (False: as if nothing were frozen,
    #: the layer-blind resize the benchmarks compare with).
    layer_aware: bool = True

    @property
    def name(self) -> str:
        return self.label or self.inner.name

    @property
    def budget_fraction(self) -> float | None:
        """The wrapped policy's budget (the controller's period budget paces it)."""
        return getattr(self.inner, "budget_fraction", None)

    def _frozen(self, job: Job, context: DecisionContext) -> float:
        """The frozen share of its blocks the job's own progress report gives (0 without one)."""
        report = context.progress.get(job.job_id)
        return report.frozen if report is not None and self.layer_aware else 0.0

    def _rates(self, job: Job, context: DecisionContext) -> _Rates:
        """The job's effective progress by GPU count, at the frozen share its report gives, scaled
        as the job was measured to scale where its reports at two counts say so."""
        model = context.models.for_job(job.name, running_gpu_type(job, context.snapshot))
        return _Rates(corrected(model, context.measured.get(job.job_id, ())), self._frozen(job, context))

    def _worth_restarting(self, job: Job, context: DecisionContext) -> tuple[GreenOptions, float, _Rates] | None:
        """(options, time left, rates) of a running elastic one-node job with more time left
        than a restart costs; None for any other job."""
        options = _elastic_single_node(job)
        if options is None:
            return None
        left_s = _time_left(job, context)
        if left_s <= self.restart_cost_s:
            return None
        return options, left_s, self._rates(job, context)


@dataclass(frozen=True)
class GrowRunning(_Wrapping):
    min_gain: float = 0.1
    energy_slack: float = 0.1

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
        found = self._worth_restarting(job, context)
        if found is None:
            return None
        options, left_s, rate = found
        high = min(options.running_gpu_bounds(job.gpus_per_node)[1], job.gpus_per_node + free.get(job.nodes[0], 0))
        for gpus in range(high, job.gpus_per_node, -1):  # the most GPUs that pays
            runtime = left_s * rate.of(job.gpus_per_node) / rate.of(gpus)
            energy = rate.energy_per_work(gpus) / rate.energy_per_work(job.gpus_per_node)
            if runtime + self.restart_cost_s <= (1 - self.min_gain) * left_s and energy <= 1 + self.energy_slack:
                return JobDecision(job.job_id, gpus_per_node=gpus, num_nodes=1, expected_runtime_s=runtime,
                                   reason=f"grow running job {job.gpus_per_node} -> {gpus} GPUs: idle GPUs no "
                                          f"pending job waits for; about {left_s / 3600:.1f} h left -> "
                                          f"{(runtime + self.restart_cost_s) / 3600:.1f} h with the restart, "
                                          f"energy x{energy:.2f}{rate.said()}")
        return None


def resizing(policy: Policy, *, restart_cost_s: float = RESTART_COST_S, energy_slack: float = 0.1,
             shrink: bool = False, label: str | None = None, layer_aware: bool = True,
             when_dear: bool = False) -> Policy:
    """``policy`` that also grows running elastic jobs (with ``shrink``, shrinks one for the
    queue's blocked head; with ``when_dear``, one whose carbon the plan's price makes dear),
    named ``label`` if given: the one way the controller, the registry and the simulator's
    callers build the chain."""
    chain: Policy = GrowRunning(policy, restart_cost_s=restart_cost_s, label=label, layer_aware=layer_aware,
                                energy_slack=energy_slack)
    if shrink:
        chain = ShrinkRunning(chain, restart_cost_s=restart_cost_s, label=label, layer_aware=layer_aware)
    if when_dear:
        chain = ShrinkWhenDear(chain, restart_cost_s=restart_cost_s, label=label, layer_aware=layer_aware)
    return chain


def resizes_running(policy: Policy) -> bool:
    """Whether ``policy`` already decides running jobs' sizes (``icefrog``)."""
    return isinstance(policy, _Wrapping)


def with_restart_cost(policy: Policy, seconds: float) -> Policy:
    """``policy`` with each of its running-job wrappers paying ``seconds`` per restart."""
    if not isinstance(policy, _Wrapping):
        return policy
    return replace(policy, inner=with_restart_cost(policy.inner, seconds), restart_cost_s=seconds)


def _someone_waits(snapshot: ClusterSnapshot) -> bool:
    """Any pending job at all: one eligible now, one deferred (for carbon, or to its
    ``--begin``) that would find its GPUs taken when it is released, one held (a job
    requeued for its own resize must find room when it is released)."""
    return any(job.state is JobState.PENDING for job in snapshot.jobs)


@dataclass(frozen=True)
class ShrinkRunning(_Wrapping):
    #: The queued job's wait saved must be at least this multiple of the shrunk job's loss.
    min_ratio: float = 2.0

    def __call__(self, context: DecisionContext) -> Plan:
        plan = self.inner(context)
        snapshot, now = context.snapshot, context.now
        head = _blocked_head(snapshot, plan, now)
        if head is None:
            return plan
        need = head[1]
        free = {node.name: node.gpus_free for node in snapshot.nodes}
        wait_s = _wait_for(need, snapshot, free, now)
        if not math.isfinite(wait_s):
            return plan  # no node could ever hold it: nothing to shrink for
        best: tuple[float, JobDecision] | None = None
        for job in snapshot.jobs:
            options = _elastic_single_node(job)
            if options is None or job.nodes[0] not in free:
                continue
            keep = job.gpus_per_node - (need - free[job.nodes[0]])
            if free[job.nodes[0]] >= need or keep < max(1, options.running_gpu_bounds(job.gpus_per_node)[0]) \
                    or keep >= job.gpus_per_node:
                continue
            left_s = _time_left(job, context)
            rate = self._rates(job, context)
            runtime = left_s * rate.of(job.gpus_per_node) / rate.of(keep)
            loss = runtime - left_s + self.restart_cost_s
            saved = wait_s - self.restart_cost_s
            if saved >= self.min_ratio * loss and (best is None or loss < best[0]):
                best = (loss, JobDecision(
                    job.job_id, gpus_per_node=keep, num_nodes=1, expected_runtime_s=runtime,
                    reason=f"shrink running job {job.gpus_per_node} -> {keep} GPUs so job {head[0]} starts: "
                           f"it would wait about {wait_s / 3600:.1f} h; this job takes about "
                           f"{loss / 3600:.1f} h longer with the restart{rate.said()}"))
        return plan if best is None else replace(plan, decisions=(*plan.decisions, best[1]))


@dataclass(frozen=True)
class ShrinkWhenDear(_Wrapping):
    #: The priced saving must exceed the time lost by this share of the job's time left.
    min_gain: float = 0.1

    def __call__(self, context: DecisionContext) -> Plan:
        plan = self.inner(context)
        running = {job.job_id for job in context.snapshot.jobs if job.state is JobState.RUNNING}
        if not plan.prices or any(d.job_id in running for d in plan.decisions):
            return plan  # nothing priced, or a running job is resized already this tick
        if not any(d.start_at is not None and d.start_at > context.now for d in plan.decisions):
            return plan  # nothing held back for carbon: the GPUs a shrink frees would go to the queue now
        best: tuple[float, JobDecision] | None = None
        for job in context.snapshot.jobs:
            found = self._shrink(job, plan, context)
            if found is not None and (best is None or found[0] > best[0]):
                best = found
        return plan if best is None else replace(plan, decisions=(*plan.decisions, best[1]))

    def _shrink(self, job: Job, plan: Plan, context: DecisionContext) -> tuple[float, JobDecision] | None:
        """(priced gain in seconds, decision) of ``job``'s best shrink, if one clears ``min_gain``,
        at the price of the pool of the GPU type it runs on."""
        found = self._worth_restarting(job, context)
        if found is None:
            return None
        price = plan.price_for(running_gpu_type(job, context.snapshot))
        if price is None or price.seconds_per_unit <= 0 or (price.resource == "carbon" and context.forecast is None):
            return None
        options, left_s, rate = found
        now, gpus = context.now, job.gpus_per_node
        spend = _Spend(rate, price, context)
        before = spend.of(gpus, now, left_s)
        best: tuple[float, JobDecision] | None = None
        for keep in range(max(1, options.running_gpu_bounds(gpus)[0]), gpus):
            runtime = left_s * rate.of(gpus) / rate.of(keep)
            # From now, not after the restart: a pause in dear hours is no saving to count on
            # (the checkpoint and the reload draw power too).
            after = spend.of(keep, now, runtime)
            lost_s = runtime + self.restart_cost_s - left_s
            gain = price.seconds_per_unit * (before - after) - lost_s
            if gain >= self.min_gain * left_s and (best is None or gain > best[0]):
                unit = "kg CO2" if price.resource == "carbon" else "kWh"
                best = (gain, JobDecision(
                    job.job_id, gpus_per_node=keep, num_nodes=1, expected_runtime_s=runtime,
                    reason=f"shrink running job {gpus} -> {keep} GPUs while {price.resource} is dear: about "
                           f"{before - after:.3g} {unit} less over its remaining run, worth "
                           f"{price.seconds_per_unit * (before - after) / 3600:.2g} h at the budget's price "
                           f"({price.seconds_per_unit:.3g} s/{unit}), for {lost_s / 3600:.2g} h longer with the "
                           f"restart{rate.said()}"))
        return best


@dataclass(frozen=True)
class _Spend:
    """What a running job's remaining work spends of the budget's resource, by GPU count and
    the hours it runs: kg CO2 at the forecast's mean over those hours, or kWh."""

    rate: _Rates
    price: Price
    context: DecisionContext

    def of(self, gpus: int, start: float, runtime_s: float) -> float:
        kwh = frozen_power_w(self.rate.model, Config(gpus), self.rate.frozen) * runtime_s / 3.6e6
        if self.price.resource == "energy":
            return kwh
        assert self.context.forecast is not None  # the caller prices carbon only with a forecast
        return kwh * float(self.context.forecast.mean_over(start, start + runtime_s)) / 1000.0


def _elastic_single_node(job: Job) -> GreenOptions | None:
    """The options of a running, elastic, single-node job whose end Slurm can estimate and whose
    GPUs a ``Gres=`` update can change (``Job.gpus_per_node_only``); else None."""
    options = parse_marker(job.admin_comment)
    if (job.state is not JobState.RUNNING or options is None or not options.managed or not options.elastic
            or job.num_nodes != 1 or len(job.nodes) != 1 or job.gpus_per_node < 1 or not job.gpus_per_node_only
            or job.start_time is None or not job.time_limit_s):
        return None
    return options


def _time_left(job: Job, context: DecisionContext) -> float:
    """A running job's time left: its time limit less what it ran (all that Slurm knows),
    or less, when the job's own progress report says so (``JobProgress.time_left_s``). A
    report only ever shortens it: a job's user can make it look closer to its end (less
    likely grown, more likely shrunk), never further."""
    assert job.start_time is not None and job.time_limit_s  # _elastic_single_node checked
    left_s = job.start_time + job.time_limit_s - context.now
    report = context.progress.get(job.job_id)
    own = report.time_left_s(context.now) if report is not None else None
    return left_s if own is None else min(left_s, own)


@dataclass(frozen=True)
class _Rates:
    """A running job's effective progress per second and energy per unit of it, by GPU count
    on its one node, at its frozen share."""

    model: JobModel
    frozen: float

    def of(self, gpus: int) -> float:
        return effective_rate(self.model, Config(gpus), self.frozen)

    def energy_per_work(self, gpus: int) -> float:
        return frozen_power_w(self.model, Config(gpus), self.frozen) / self.of(gpus)

    def said(self) -> str:
        """What a decision's reason adds about freezing and measured scaling (nothing for a job
        rated as modelled)."""
        frozen = f"; rated with {self.frozen:.0%} of its blocks frozen (its report)" if self.frozen else ""
        return frozen + (self.model.said() if isinstance(self.model, MeasuredScaling) else "")


def _blocked_head(snapshot: ClusterSnapshot, plan: Plan, now: float) -> tuple[int, int] | None:
    """(job id, GPUs it needs on one node) of the oldest pending job that wants to start now
    (not held; eligible, or the plan starts it now) and fits on no node; None if that job
    spans nodes, fits, or there is none."""
    starts = {d.job_id: d for d in plan.decisions if d.start_at is not None and d.start_at <= now}
    wanting = [job for job in snapshot.jobs if job.state is JobState.PENDING and not job.held
               and (job.job_id in starts or job.eligible_time is None or job.eligible_time <= now)]
    if not wanting:
        return None
    head = min(wanting, key=lambda job: (job.submit_time, job.job_id))
    decided = starts.get(head.job_id)
    per_node = decided.gpus_per_node if decided is not None and decided.gpus_per_node else head.gpus_per_node
    nodes = decided.num_nodes if decided is not None and decided.num_nodes else head.num_nodes
    if nodes != 1 or per_node < 1 or any(node.gpus_free >= per_node for node in snapshot.nodes):
        return None
    return head.job_id, per_node


def _wait_for(need: int, snapshot: ClusterSnapshot, free: dict[str, int], now: float) -> float:
    """How long until ``need`` GPUs are free on one node, as running jobs end by their time
    limits (infinite if no node ever has them)."""
    ends: dict[str, list[tuple[float, int]]] = {}
    for job in snapshot.jobs:
        if job.state is JobState.RUNNING and job.time_limit_s and job.start_time is not None:
            for node in job.nodes:
                ends.setdefault(node, []).append((job.start_time + job.time_limit_s, job.gpus_per_node))
    best = math.inf
    for name, have in free.items():
        for end, gpus in sorted(ends.get(name, [])):
            have += gpus
            if have >= need:
                best = min(best, max(0.0, end - now))
                break
    return best
