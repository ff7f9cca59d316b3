"""The baselines GreenFlow is measured against, each implemented as its authors describe.

- ``fifo``: what Slurm does without slurm-green: every job released at once, as
  requested, at full power; the backend's FIFO + backfill scheduler does the rest.
- ``window`` / ``window+cap``: carbon-aware start times ("Let's Wait Awhile", CATS),
  i.e. :class:`~slurm_green.policy.window.WindowPolicy` with the cap disabled or enabled.
- ``zeus``: start at once as requested, under a per-job-type power cap chosen like
  Zeus (NSDI'23) to minimise ``eta * energy + (1 - eta) * max_power * time``, on the
  models of the GPU type the job will run on and among the caps that type allows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurm_green.core.decision import DecisionContext
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.policy.config_table import cap_choices, config_table
from slurm_green.policy.gpu_types import job_gpu_types
from slurm_green.policy.pending import PendingJobs, gpus_per_node_of, pending_jobs
from slurm_green.policy.window import WindowPolicy


@dataclass(frozen=True)
class FifoPolicy:
    """Carbon-agnostic: release every managed job now, untouched and uncapped."""

    name: str = "fifo"

    def __call__(self, context: DecisionContext) -> Plan:
        jobs = pending_jobs(context.snapshot, 0.0, context.memo)
        return Plan(decisions=tuple(
            JobDecision(int(j), start_at=context.now, reason="carbon-agnostic FIFO: start now at full power")
            for j in jobs.job_id))


@dataclass(frozen=True)
class ZeusCapPolicy:
    """Start now, as requested, at the energy-time optimal cap of the job's type (Zeus).

    Its cap set is the GPU type's allowed caps from ``floor`` (Zeus's own grid: half the
    board, every 10 %), so a board whose minimum is higher is never asked for less.
    ``typed=False`` plans every job with the registry's own type (the type-blind
    baseline of a mixed cluster), as this policy did before clusters had types.
    """

    name: str = "zeus"
    #: Zeus' knob: 1 weighs only energy, 0 only time.
    eta: float = 0.5
    floor: float = 0.5
    step: float = 0.1
    typed: bool = True

    def __call__(self, context: DecisionContext) -> Plan:
        snapshot, memo = context.snapshot, context.memo
        jobs = pending_jobs(snapshot, 0.0, memo)
        if not len(jobs):
            return Plan()
        gpu_types = job_gpu_types(snapshot, jobs.jobs, memo) if self.typed else (None,) * len(jobs)
        gpn = gpus_per_node_of(snapshot, memo)
        best, slowdown = np.ones(len(jobs)), np.ones(len(jobs))
        for gpu in set(gpu_types):
            rows = np.fromiter((t == gpu for t in gpu_types), dtype=bool, count=len(jobs))
            best[rows], slowdown[rows] = self._best_caps(jobs, rows, context, gpu, gpn)
        # The runtime at the cap, from the time limit as asked (none without one): what the
        # planner raises the limit to (``SetTimeLimit``).
        return Plan(decisions=tuple(
            JobDecision(int(j), start_at=context.now, power_cap_fraction=float(c) if ok else None,
                        reason=f"Zeus cap {c:.0%} (eta {self.eta:g}){f' on {g}' if g else ''}, start now",
                        expected_runtime_s=float(r * (k if ok else 1.0)) if r > 0 else None, gpu_type=g)
            for j, c, ok, g, r, k in zip(jobs.job_id, best, jobs.accept_cap, gpu_types, jobs.runtime_s, slowdown)))

    def _best_caps(self, jobs: PendingJobs, rows: np.ndarray, context: DecisionContext, gpu: str | None,
                   gpn: int) -> tuple[np.ndarray, np.ndarray]:
        """The Zeus cap of each job in ``rows``, all planned on ``gpu``, and how much slower it runs there."""
        job_type = [t for t, row in zip(jobs.job_type, rows) if row]
        gpus = jobs.gpus[rows]
        caps = cap_choices(context.models, gpu, floor=self.floor, step=self.step)
        table = config_table(context.models, set(job_type), set(gpus.tolist()), caps, gpn, gpu, context.memo)
        types = np.fromiter((table.type_index[t] for t in job_type), dtype=np.int64, count=len(job_type))
        cols = np.searchsorted(table.gpus, gpus)
        tput = table.throughput[types, cols]  # [N, C]
        power = table.power_w[types, cols]
        max_power = power[:, -1:]
        cost = (self.eta * power + (1.0 - self.eta) * max_power) / tput  # per unit of work
        chosen = np.argmin(cost, axis=1)
        return table.caps[chosen], tput[:, -1] / tput[np.arange(len(chosen)), chosen]  # caps ascend to 1.0
