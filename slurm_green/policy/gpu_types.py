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
from slurm_green.core.models import Config, ModelRegistry
from slurm_green.core.partitions import node_rules


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


def gpu_pools(snapshot: ClusterSnapshot, memo: DecisionMemo,
              models: ModelRegistry) -> list[tuple[str | None, ClusterSnapshot]]:
    """The cluster split by GPU type, for a policy that plans GPU counts and placement.

    Each type's nodes form a pool with the jobs running on them and the pending jobs planned
    for that type (``planned_types``). Pools do not compete for GPUs, so planning each alone
    loses little. A cluster with at most one type is one pool: the snapshot itself.
    """
    kinds = sorted({node.gpu_type for node in snapshot.nodes if node.gpus_total > 0}, key=lambda t: t or "")
    if len(kinds) <= 1:
        return [(kinds[0] if kinds else None, snapshot)]
    planned = planned_types(snapshot, kinds, memo, models)
    pools = []
    for kind in kinds:
        nodes = tuple(node for node in snapshot.nodes if node.gpu_type == kind)
        names = {node.name for node in nodes}
        jobs = tuple(job for job in snapshot.jobs
                     if (planned[job.job_id] == kind if job.is_pending else not names.isdisjoint(job.nodes)))
        pools.append((kind, ClusterSnapshot(taken_at=snapshot.taken_at, slurm_version=snapshot.slurm_version,
                                            jobs=jobs, nodes=nodes, partitions=snapshot.partitions)))
    return pools


def planned_types(snapshot: ClusterSnapshot, kinds: list[str | None], memo: DecisionMemo,
                  models: ModelRegistry) -> dict[int, str | None]:
    """The GPU type each pending job of a mixed cluster is planned for, by job id.

    A job that asked for a type is planned for it (a type no node has: the cluster's majority).
    A job that asked for none and may run on nodes of several types (plain ``--gres=gpu:N`` in
    a partition of H100 and A40 nodes, the common case) runs wherever Slurm finds room, so it
    is given, in Slurm's queue order, the fastest type for it (the models' throughput at its
    size) whose free GPUs, less those given to the jobs before it, hold it; where none does,
    the type whose queue, counted in its GPUs and their speed, it lengthens least. Ties go to
    its partition's majority type, then by name; a job an earlier tick pinned keeps its nodes'
    type. Before, every such job was planned for the majority type alone, which left the other
    type's GPUs to Slurm: on the Gavel trace with every job untyped on 8 H100 and 8 A40 nodes,
    GreenFlow's average JCT was 2.46 x FIFO's (``benchmarks/mixed_cluster.py --untyped 1``).
    """
    speeds: dict[tuple[str, str | None, int], float] = {}

    def speed(job: Job, kind: str | None) -> float:
        key = (job.name, kind, job.total_gpus)
        if key not in speeds:
            config = Config(max(1, job.total_gpus), max(1, job.num_nodes))
            speeds[key] = models.for_job(job.name or None, kind).throughput(config)
        return speeds[key]

    types = cluster_gpu_types(snapshot, memo)
    rules = node_rules(snapshot, memo)
    type_of = {node.name: node.gpu_type for node in snapshot.nodes if node.gpus_total > 0}
    free: Counter[str | None] = Counter()
    size: Counter[str | None] = Counter()
    for node in snapshot.nodes:
        free[node.gpu_type] += node.gpus_free
        size[node.gpu_type] += node.gpus_total
    queued: Counter[str | None] = Counter()
    planned: dict[int, str | None] = {}
    open_to: dict[frozenset[str] | None, list[str | None]] = {}  # the types among a set of allowed nodes
    pending = sorted((job for job in snapshot.jobs if job.is_pending),
                     key=lambda job: (-job.priority, job.submit_time, job.job_id))
    for job in pending:
        usual = types.of(job)
        if usual not in kinds:
            usual = types.majority
        if job.gpu_type:
            options = [usual]
        else:
            allowed = rules.allowed(job)
            if allowed not in open_to:
                there = {t for n, t in type_of.items() if allowed is None or n in allowed}
                open_to[allowed] = [k for k in kinds if k in there]
            options = open_to[allowed] or [usual]
        pinned = {type_of.get(name) for name in job.nodes}
        need = job.total_gpus
        if len(options) == 1:
            kind = options[0]
        elif len(pinned) == 1 and (held := next(iter(pinned))) in options:
            kind = held
        else:
            order = sorted(options, key=lambda k: (k != usual, k or ""))
            fitting = [k for k in order if free[k] >= need]
            kind = (max(fitting, key=lambda k: speed(job, k)) if fitting
                    else min(order, key=lambda k: (queued[k] + need) / (max(1, size[k]) * speed(job, k))))
        if free[kind] >= need:
            free[kind] -= need
        else:
            queued[kind] += need
        planned[job.job_id] = kind
    return planned


def running_gpu_type(job: Job, snapshot: ClusterSnapshot) -> str | None:
    """The GPU type a running job runs on: its request's, else its first node's (a job that
    asked for no type still runs on one; None where the nodes report none)."""
    if job.gpu_type or not job.nodes:
        return job.gpu_type
    return next((node.gpu_type for node in snapshot.nodes if node.name == job.nodes[0]), None)
