"""The managed pending jobs of a snapshot as columns, for policies that decide in bulk.

Vectorised policies need arrays (submit time, deadline, GPU range, runtime) rather
than objects; building them once per decision keeps the per-job Python work to
one pass over the snapshot.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from slurm_green.core.cluster import ClusterSnapshot, Job
from slurm_green.core.green_options import GreenOptions, parse_marker
from slurm_green.policy.managed import deadline_of

#: AdminComment markers are immutable per job and repeat across ticks: parse each once.
_parse_marker = lru_cache(maxsize=1 << 17)(parse_marker)


@dataclass(frozen=True)
class PendingJobs:
    """Columns of the managed pending jobs, in FIFO order (submit time, then job id).

    ``runtime_s`` is the runtime at the job's current GPU count at full power, taken
    from its time limit (all Slurm knows) or ``default_runtime_s`` without one.
    ``gpus_min``/``gpus_max`` are the user's allowed range, or the current count.
    """

    jobs: tuple[Job, ...]
    options: tuple[GreenOptions, ...]
    job_id: np.ndarray
    submit: np.ndarray
    deadline: np.ndarray
    gpus: np.ndarray
    gpus_min: np.ndarray
    gpus_max: np.ndarray
    accept_cap: np.ndarray
    runtime_s: np.ndarray
    job_type: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.jobs)


def _managed_pending(snapshot: ClusterSnapshot) -> list[tuple[Job, GreenOptions]]:
    """Same rule as ``managed.managed_pending`` (trusted marker says managed), with memoised parsing."""
    out = []
    for job in snapshot.jobs:
        if job.is_pending:
            options = _parse_marker(job.admin_comment)
            if options is not None and options.managed:
                out.append((job, options))
    return out


def pending_jobs(snapshot: ClusterSnapshot, default_runtime_s: float) -> PendingJobs:
    pairs = sorted(_managed_pending(snapshot), key=lambda p: (p[0].submit_time, p[0].job_id))
    jobs = tuple(job for job, _ in pairs)
    options = tuple(opt for _, opt in pairs)
    gpus = np.fromiter((max(1, j.total_gpus) for j in jobs), dtype=np.int64, count=len(jobs))
    low = np.fromiter((o.gpus_min if o.gpus_min is not None else max(1, j.total_gpus) for j, o in pairs),
                      dtype=np.int64, count=len(jobs))
    high = np.fromiter((o.gpus_max if o.gpus_max is not None else max(1, j.total_gpus) for j, o in pairs),
                       dtype=np.int64, count=len(jobs))
    return PendingJobs(
        jobs=jobs,
        options=options,
        job_id=np.fromiter((j.job_id for j in jobs), dtype=np.int64, count=len(jobs)),
        submit=np.fromiter((j.submit_time for j in jobs), dtype=np.float64, count=len(jobs)),
        deadline=np.fromiter((deadline_of(j, o) for j, o in pairs), dtype=np.float64, count=len(jobs)),
        gpus=gpus,
        gpus_min=np.minimum(low, high),
        gpus_max=high,
        accept_cap=np.fromiter((o.accept_cap for o in options), dtype=bool, count=len(jobs)),
        runtime_s=np.fromiter((j.time_limit_s or default_runtime_s for j in jobs), dtype=np.float64,
                              count=len(jobs)),
        job_type=tuple(j.name for j in jobs),
    )


def gpus_per_node_of(snapshot: ClusterSnapshot, default: int = 8) -> int:
    """The most common GPU count per node: the unit in which multi-node jobs are packed."""
    counts = Counter(node.gpus_total for node in snapshot.nodes if node.gpus_total > 0)
    return counts.most_common(1)[0][0] if counts else default
