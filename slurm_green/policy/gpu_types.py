"""The GPU type a job will run on, as far as a policy can tell before it starts.

A job's speed, power and allowed caps depend on the GPU under it, so a policy plans
each pending job with the models of the type it will get: the type it asked for
(``--gres=gpu:h100:2``), else the type most of its partition's GPUs are, else the
cluster's. ``None`` means the nodes report no type (an untyped ``gres/gpu``): the
registry's own type, as before clusters had types.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from slurm_green.core.cluster import ClusterSnapshot, Job, Node
from slurm_green.core.decision import DecisionMemo


@dataclass(frozen=True)
class ClusterGpuTypes:
    """The majority GPU type (by GPU count) of the cluster and of each partition."""

    majority: str | None
    by_partition: dict[str, str | None]

    def of(self, job: Job) -> str | None:
        """The type ``job`` is planned for: its request, its partition's, the cluster's."""
        if job.gpu_type:
            return job.gpu_type
        return self.by_partition.get(job.partition, self.majority)


def _majority(counts: Counter[str | None]) -> str | None:
    # Most GPUs wins; ties go to the name first in order, so the answer never depends on node order.
    return min(counts, key=lambda t: (-counts[t], t or "")) if counts else None


def _types(nodes: tuple[Node, ...]) -> ClusterGpuTypes:
    total: Counter[str | None] = Counter()
    per_partition: dict[str, Counter[str | None]] = {}
    for node in nodes:
        if node.gpus_total <= 0:
            continue
        total[node.gpu_type] += node.gpus_total
        for partition in node.partitions:
            per_partition.setdefault(partition, Counter())[node.gpu_type] += node.gpus_total
    return ClusterGpuTypes(_majority(total), {p: _majority(c) for p, c in per_partition.items()})


@dataclass
class _TypesMemo:
    """The last snapshot's nodes and their types, in a controller's memo: nodes change far
    less often than a policy asks (the held tuple keeps the identity check sound)."""

    last: tuple[tuple[Node, ...], ClusterGpuTypes] | None = None


def cluster_gpu_types(snapshot: ClusterSnapshot, memo: DecisionMemo) -> ClusterGpuTypes:
    """The GPU types of ``snapshot``'s nodes (re-read only when the node tuple changes)."""
    held = memo.get(_TypesMemo)
    if held.last is None or held.last[0] is not snapshot.nodes:
        held.last = (snapshot.nodes, _types(snapshot.nodes))
    return held.last[1]


def job_gpu_types(snapshot: ClusterSnapshot, jobs: tuple[Job, ...], memo: DecisionMemo) -> tuple[str | None, ...]:
    """Each job's planned GPU type, in order (see ``ClusterGpuTypes.of``)."""
    types = cluster_gpu_types(snapshot, memo)
    return tuple(types.of(job) for job in jobs)


def gpu_pools(snapshot: ClusterSnapshot, memo: DecisionMemo) -> list[tuple[str | None, ClusterSnapshot]]:
    """The cluster split by GPU type, for a policy that plans GPU counts and placement.

    A job runs on the type it asked for (or its partition's), so each type's nodes form a
    pool with the jobs running on them and the pending jobs planned for that type
    (``ClusterGpuTypes.of``; a type no node has goes to the cluster's majority). Pools do
    not compete for GPUs, so planning each alone loses nothing. A cluster with at most one
    type is one pool: the snapshot itself.
    """
    kinds = sorted({node.gpu_type for node in snapshot.nodes if node.gpus_total > 0}, key=lambda t: t or "")
    if len(kinds) <= 1:
        return [(kinds[0] if kinds else None, snapshot)]
    types = cluster_gpu_types(snapshot, memo)
    pools = []
    for kind in kinds:
        nodes = tuple(node for node in snapshot.nodes if node.gpu_type == kind)
        names = {node.name for node in nodes}
        jobs = tuple(job for job in snapshot.jobs
                     if (_planned(types, job, kinds) == kind if job.is_pending else not names.isdisjoint(job.nodes)))
        pools.append((kind, ClusterSnapshot(taken_at=snapshot.taken_at, slurm_version=snapshot.slurm_version,
                                            jobs=jobs, nodes=nodes, partitions=snapshot.partitions)))
    return pools


def _planned(types: ClusterGpuTypes, job: Job, kinds: list[str | None]) -> str | None:
    kind = types.of(job)
    return kind if kind in kinds else types.majority


def running_gpu_type(job: Job, snapshot: ClusterSnapshot) -> str | None:
    """The GPU type a running job runs on: its request's, else its first node's (a job that
    asked for no type still runs on one; None where the nodes report none)."""
    if job.gpu_type or not job.nodes:
        return job.gpu_type
    return next((node.gpu_type for node in snapshot.nodes if node.name == job.nodes[0]), None)
