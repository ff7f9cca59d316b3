"""The managed pending jobs of a snapshot as columns, for policies that decide in bulk.

Vectorised policies need arrays (submit time, deadline, GPU range, runtime) rather
than objects; building them once per decision keeps the per-job Python work to
one pass over the snapshot.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter

import numpy as np

from slurm_green.core.cluster import ClusterSnapshot, Job, JobState
from slurm_green.core.decision import DecisionMemo
from slurm_green.core.green_options import GreenOptions, parse_marker
from slurm_green.core.partitions import NodeRules, node_rules
from slurm_green.core.time_limit import partition_limits, partition_max_times
from slurm_green.policy.managed import asked_runtime_s, blocked, deadline_of, not_yet
from slurm_green.policy.placement import node_rows


@dataclass(frozen=True)
class PendingJobs:
    """Columns of the managed pending jobs, in FIFO order (submit time, then job id).

    ``runtime_s`` is the runtime at the job's current GPU count at full power, taken
    from its time limit as submitted (all Slurm knows; ``managed.asked_runtime_s``) or
    ``default_runtime_s`` without one.
    ``gpus_min``/``gpus_max`` are the user's allowed range, or the current count; the most is
    at most what as many nodes as it may be given (its partitions' ``MaxNodes``, its user's
    task count: ``NodeRules.most_nodes``) can hold of its GPUs, CPUs and memory per GPU
    (``NodeRules.most_gpus_per_node``), never below its own request.
    ``max_runtime_s`` is the partition's ``MaxTime`` (inf: none): no raise of a job's limit
    passes it, so no decision may slow a job past it (``planner.within_max_time``).
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
    max_runtime_s: np.ndarray

    def __len__(self) -> int:
        return len(self.jobs)


#: One managed pending job's columns: (sort key, job, options, id, submit, deadline, GPUs,
#: lowest GPUs, highest GPUs, accepts a cap, runtime, job type, its partition's MaxTime).
_Row = tuple[tuple[float, int], Job, GreenOptions, int, float, float, int, int, int, bool, float, str, float]


@dataclass
class _RowsMemo:
    """Per pending job id: (the Job object, the (default runtime, partition's default limit) it
    was read with, its row or None if unmanaged), from the controller's last call. Jobs are
    immutable and are replaced when they change, so a row is reused only for the very same
    object (held here, so the identity check is sound); only the last call's pending jobs are kept."""

    rows: dict[int, tuple[Job, _ReadWith, _Row | None]] = field(default_factory=dict)


#: What a row was read with besides the job: (default runtime, its partition's default limit,
#: its partition's MaxTime, the most GPUs it may be given, ``_most_gpus``).
_ReadWith = tuple[float, float | None, float | None, float]


def _row(job: Job, default_runtime_s: float, limits: Mapping[str, float | None], read_with: _ReadWith) -> _Row | None:
    options = parse_marker(job.admin_comment)
    if options is None or not options.managed:
        return None
    gpus = max(1, job.total_gpus)
    # GPUs asked per job, task or socket: no size change can be enacted (``Job.gpus_per_node_only``)
    low, high = options.gpu_bounds(gpus) if job.gpus_per_node_only else (gpus, gpus)
    if high > read_with[3]:  # past what it may be given: cut to it, but never below its own request
        high = int(max(read_with[3], min(gpus, high)))
    return ((job.submit_time, job.job_id), job, options, job.job_id, job.submit_time, deadline_of(job, options),
            gpus, low, high, options.accept_cap,
            asked_runtime_s(job, options, limits, default_runtime_s), job.name, read_with[2] or math.inf)


def _most_gpus(job: Job, partitions_limit: bool, rules: Callable[[], NodeRules]) -> float:
    """The most GPUs ``job`` could have on as many of the nodes it may run on as it may be given
    (inf: no limit on their number): ``NodeRules.most_nodes`` x ``most_gpus_per_node``. The rule
    is asked only where some partition limits nodes or the job's user gave a task count (never
    in the simulator)."""
    options = parse_marker(job.admin_comment)
    if not partitions_limit and (options is None or options.tasks is None):
        return math.inf
    held = rules()
    if (most := held.most_nodes(job)) is None:
        return math.inf
    allowed = held.allowed(job)
    return float(most * held.most_gpus_per_node(job, allowed if allowed is not None else held.names))


def pending_jobs(snapshot: ClusterSnapshot, default_runtime_s: float, memo: DecisionMemo) -> PendingJobs:
    """The managed pending jobs of ``snapshot`` as columns (rows reused from ``memo``)."""
    held = memo.get(_RowsMemo)
    last = held.rows
    kept: dict[int, tuple[Job, _ReadWith, _Row | None]] = {}
    rows = []
    pending = JobState.PENDING
    limits, max_times = partition_limits(snapshot), partition_max_times(snapshot)
    partitions_limit = any(p.max_nodes for p in snapshot.partitions)
    rules = partial(node_rules, snapshot, memo)
    for job in [job for job in snapshot.jobs if job.state is pending]:  # most active jobs run
        hit = last.get(job.job_id)
        read_with = (default_runtime_s, limits.get(job.partition or ""), max_times.get(job.partition),
                     _most_gpus(job, partitions_limit, rules))
        if hit is not None and hit[0] is job and hit[1] == read_with:
            row = hit[2]
        else:
            row = _row(job, default_runtime_s, limits, read_with)
        kept[job.job_id] = (job, read_with, row)
        if row is not None and not not_yet(row[2], snapshot.taken_at) and not blocked(job):
            rows.append(row)
    held.rows = kept
    rows.sort(key=itemgetter(0))  # FIFO: submit time, then job id (unique, so the order is total)
    n = len(rows)
    cols = list(zip(*rows)) if n else [()] * 13
    low = np.array(cols[7], dtype=np.int64).reshape(n)
    high = np.array(cols[8], dtype=np.int64).reshape(n)
    return PendingJobs(
        jobs=cols[1],
        options=cols[2],
        job_id=np.array(cols[3], dtype=np.int64).reshape(n),
        submit=np.array(cols[4], dtype=np.float64).reshape(n),
        deadline=np.array(cols[5], dtype=np.float64).reshape(n),
        gpus=np.array(cols[6], dtype=np.int64).reshape(n),
        gpus_min=np.minimum(low, high),
        gpus_max=high,
        accept_cap=np.array(cols[9], dtype=bool).reshape(n),
        runtime_s=np.array(cols[10], dtype=np.float64).reshape(n),
        job_type=cols[11],
        max_runtime_s=np.array(cols[12], dtype=np.float64).reshape(n),
    )


def gpus_per_node_of(snapshot: ClusterSnapshot, memo: DecisionMemo, default: int = 8) -> int:
    """The most common GPU count per node: the unit in which multi-node jobs are packed."""
    counts = Counter([row[1] for row in node_rows(snapshot.nodes, memo) if row[1] > 0])  # row[1]: the node's GPUs
    return counts.most_common(1)[0][0] if counts else default
