"""The baselines GreenFlow is measured against, each implemented as its authors describe.

- ``fifo``: what Slurm does without slurm-green: every job released at once, as
  requested, at full power; the backend's FIFO + backfill scheduler does the rest.
- ``window`` / ``window+cap``: carbon-aware start times ("Let's Wait Awhile", CATS),
  i.e. :class:`~slurm_green.policy.window.WindowPolicy` with the cap disabled or enabled.
- ``zeus``: start at once as requested, under a per-job-type power cap chosen like
  Zeus (NSDI'23) to minimise ``eta * energy + (1 - eta) * max_power * time``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurm_green.core.cluster import ClusterSnapshot
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.policy.config_table import config_table
from slurm_green.policy.pending import gpus_per_node_of, pending_jobs
from slurm_green.policy.window import WindowPolicy


@dataclass(frozen=True)
class FifoPolicy:
    """Carbon-agnostic: release every managed job now, untouched and uncapped."""

    name: str = "fifo"

    def __call__(self, snapshot: ClusterSnapshot, forecast: object | None, models: object, now: float) -> Plan:
        jobs = pending_jobs(snapshot, 0.0)
        return Plan(decisions=tuple(
            JobDecision(int(j), start_at=now, reason="carbon-agnostic FIFO: start now at full power")
            for j in jobs.job_id))


@dataclass(frozen=True)
class ZeusCapPolicy:
    """Start now, as requested, at the energy-time optimal cap of the job's type (Zeus)."""

    name: str = "zeus"
    #: Zeus' knob: 1 weighs only energy, 0 only time.
    eta: float = 0.5
    caps: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

    def __call__(self, snapshot: ClusterSnapshot, forecast: object | None, models: object, now: float) -> Plan:
        jobs = pending_jobs(snapshot, 0.0)
        if not len(jobs):
            return Plan()
        caps = tuple(sorted(set(self.caps) | {1.0}))
        table = config_table(models, set(jobs.job_type), set(jobs.gpus.tolist()), caps,
                             gpus_per_node_of(snapshot))
        types = np.fromiter((table.type_index[t] for t in jobs.job_type), dtype=np.int64, count=len(jobs))
        cols = np.searchsorted(table.gpus, jobs.gpus)
        tput = table.throughput[types, cols]  # [N, C]
        power = table.power_w[types, cols]
        max_power = power[:, -1:]
        cost = (self.eta * power + (1.0 - self.eta) * max_power) / tput  # per unit of work
        best = table.caps[np.argmin(cost, axis=1)]
        return Plan(decisions=tuple(
            JobDecision(int(j), start_at=now, power_cap_fraction=float(c) if ok else None,
                        reason=f"Zeus cap {c:.0%} (eta {self.eta:g}), start now")
            for j, c, ok in zip(jobs.job_id, best, jobs.accept_cap)))


def window_baseline(cap: bool) -> WindowPolicy:
    """Let's Wait Awhile / CATS start-time shifting, without or with the fixed cap."""
    return WindowPolicy(name="window+cap", cap_fraction=0.7) if cap else WindowPolicy(name="window",
                                                                                       cap_fraction=None)
