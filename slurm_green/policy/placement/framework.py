"""The scoring framework's vocabulary: the cluster as arrays, a request, its options.

Modelled on the Kubernetes scheduler framework: *Filter* plugins drop the nodes a
request cannot use, *Score* plugins rate each remaining option, and the caller (here
``scorer.Scorer``) normalises and weights the scores. An option is a node and, for a
partial-GPU request, the GPU it would share; a whole-GPU request takes fully free GPUs
(``gpu = -1``, the slots are chosen at placement: an aligned block when there is one).

GPU capacity is counted in thousandths of a GPU (*milli*, as the Alibaba trace and
FGD do): a whole GPU is 1000, a Slurm ``gres/shard`` is ``1000 / shards per GPU``.
Slurm keeps whole-GPU and shard allocations apart: a GPU with shards in use is not
free for a ``gres/gpu`` job, so whole-GPU requests only take GPUs at 1000 free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from slurm_green.core.cluster import ClusterSnapshot, Job

MILLI = 1000
#: Free CPU/memory of a node whose CPUs and memory the snapshot does not report (Slurm
#: snapshots carry GPUs only): large enough that no request is refused for them.
UNREPORTED = np.iinfo(np.int64).max // 4


@dataclass(frozen=True, slots=True)
class Request:
    """What one task asks for on one node.

    ``gpus`` GPUs with ``gpu_milli`` of each (``gpus == 1`` and ``gpu_milli < 1000``: a
    partial GPU, shared with others); ``models``: the GPU model ids it may run on
    (``None``: any).
    """

    gpus: int = 1
    gpu_milli: int = MILLI
    cpu_milli: int = 0
    mem_mib: int = 0
    models: frozenset[int] | None = None

    def __post_init__(self) -> None:
        if self.gpus < 0 or not 0 < self.gpu_milli <= MILLI or (self.gpus > 1 and self.gpu_milli != MILLI):
            raise ValueError(f"a request is N whole GPUs or one partial GPU, not {self.gpus} x {self.gpu_milli}/1000")

    @property
    def partial(self) -> bool:
        return self.gpus == 1 and self.gpu_milli < MILLI

    @property
    def total_milli(self) -> int:
        return self.gpus * self.gpu_milli

    @classmethod
    def from_job(cls, job: Job, shards_per_gpu: int) -> "Request":
        """A Slurm job's per-node request: its GPUs, or its shards as a share of one GPU, and its
        CPUs and memory per node where the snapshot knows them (0, which never limits, if not)."""
        cpu_milli = 1000 * job.cpus_per_node if job.cpus > 0 else 0
        if job.shards_per_node > 0 and job.gpus_per_node == 0:
            if shards_per_gpu <= 0 or job.shards_per_node > shards_per_gpu:
                raise ValueError(f"job {job.job_id}: {job.shards_per_node} shards do not fit one GPU of "
                                 f"{shards_per_gpu} shards")
            return cls(1, MILLI * job.shards_per_node // shards_per_gpu, cpu_milli, job.memory_per_node_mib)
        return cls(job.gpus_per_node, MILLI, cpu_milli, job.memory_per_node_mib)


@dataclass
class Nodes:
    """Free resources per node: the state plugins read and ``take`` changes.

    ``gpu_free[n, s]`` is the milli free on GPU slot ``s`` of node ``n`` (0 for slots the
    node does not have, see ``gpu_exists``).
    """

    names: tuple[str, ...]
    model: np.ndarray  #: int GPU model id per node
    gpu_exists: np.ndarray  #: bool [node, slot]
    gpu_free: np.ndarray  #: int64 [node, slot], milli
    cpu_free: np.ndarray  #: int64 milli-cores
    mem_free: np.ndarray  #: int64 MiB
    model_names: tuple[str, ...] = ()

    @property
    def gpu_used(self) -> np.ndarray:
        """Milli in use per GPU slot (0 for absent slots)."""
        return np.where(self.gpu_exists, MILLI - self.gpu_free, 0)

    @classmethod
    def from_snapshot(cls, snapshot: ClusterSnapshot) -> "Nodes":
        """The available GPU nodes of a Slurm snapshot. Slurm reports which GPUs are allocated
        whole but only a count of shards per node: the shards are taken to sit on the node's
        other GPUs lowest index first, filling one GPU before the next (what ``select/cons_tres``
        does for a node's first shard jobs; an approximation once jobs have ended). CPUs and
        memory free are the node's where Slurm reported them, ``UNREPORTED`` (never limiting)
        where not."""
        usable = [n for n in snapshot.nodes if n.available and n.gpus_total > 0]
        slots = max((n.gpus_total for n in usable), default=0)
        exists = np.arange(slots)[None, :] < np.array([n.gpus_total for n in usable]).reshape(-1, 1)
        free = np.where(exists, MILLI, 0).astype(np.int64)
        for i, node in enumerate(usable):
            whole = list(node.gpu_indices_allocated or range(node.gpus_allocated))
            free[i, whole] = 0
            _spread_shards(free[i], node.shards_allocated, node.shards_total, node.gpus_total)
        types = sorted({n.gpu_type or "" for n in usable})
        model = np.array([types.index(n.gpu_type or "") for n in usable], dtype=np.int64)
        cpu = np.array([UNREPORTED if n.cpus_free is None else 1000 * n.cpus_free for n in usable], dtype=np.int64)
        mem = np.array([UNREPORTED if n.memory_free_mib is None else n.memory_free_mib for n in usable],
                       dtype=np.int64)
        return cls(tuple(n.name for n in usable), model, exists, free, cpu, mem, tuple(types))


def _spread_shards(free: np.ndarray, used: int, total: int, gpus: int) -> None:
    """Take ``used`` of the node's ``total`` shards (``total / gpus`` per GPU) from its fully free
    GPUs in ``free`` (one node's row, changed in place), filling each GPU before the next."""
    if used <= 0 or total <= 0:
        return
    per_gpu = total // gpus
    for slot in np.flatnonzero(free == MILLI):
        if used <= 0:
            return
        here = min(used, per_gpu)
        free[slot] -= MILLI * here // per_gpu
        used -= here


@dataclass(frozen=True, slots=True)
class Options:
    """The placements a Score plugin rates: ``node[i]`` and, for a partial request, ``gpu[i]``."""

    node: np.ndarray
    gpu: np.ndarray  #: -1 for whole-GPU requests

    def __len__(self) -> int:
        return len(self.node)


class FilterPlugin(Protocol):
    """Which nodes can take the request at all."""

    def feasible(self, nodes: Nodes, request: Request) -> np.ndarray:
        """bool per node."""
        ...


class ScorePlugin(Protocol):
    """How good each option is; higher is better, any scale (the scorer normalises)."""

    def score(self, nodes: Nodes, request: Request, options: Options) -> np.ndarray:
        """float per option."""
        ...


def options_for(nodes: Nodes, request: Request, feasible: np.ndarray) -> Options:
    """Every distinct option on the feasible nodes: one per node for whole GPUs; for a partial
    GPU one per distinct free amount that fits (GPUs with the same free amount on one node are
    the same option, the lowest index stands for them)."""
    rows = np.flatnonzero(feasible)
    if not request.partial:
        return Options(rows, np.full(len(rows), -1))
    free = nodes.gpu_free[rows]
    fits = nodes.gpu_exists[rows] & (free >= request.gpu_milli)
    # First slot of each distinct free value per row: equal values to the left are dropped.
    slots = free.shape[1]
    earlier_same = np.zeros_like(fits)
    for s in range(1, slots):
        earlier_same[:, s] = ((free[:, :s] == free[:, s:s + 1]) & fits[:, :s]).any(axis=1)
    hit_rows, hit_slots = np.nonzero(fits & ~earlier_same)
    return Options(rows[hit_rows], hit_slots)


def free_after(nodes: Nodes, request: Request, options: Options) -> np.ndarray:
    """The free milli per GPU slot of each option's node once the request is on it [option, slot]
    (for whole GPUs, which fully free ones are taken does not matter to any score)."""
    free = nodes.gpu_free[options.node].copy()
    if request.partial:
        free[np.arange(len(options)), options.gpu] -= request.gpu_milli
    elif request.gpus > 0:
        whole = nodes.gpu_exists[options.node] & (free == MILLI)
        free[whole & (np.cumsum(whole, axis=1) <= request.gpus)] = 0
    return free


def whole_slots(nodes: Nodes, node: int, count: int) -> np.ndarray:
    """The fully free GPU slots a whole-GPU request takes on ``node``: the first aligned block
    of ``count`` (buddy allocation, so freed blocks merge back) when ``count`` is a power of two
    dividing the slots, else the lowest fully free slots."""
    whole = nodes.gpu_exists[node] & (nodes.gpu_free[node] == MILLI)
    slots = len(whole)
    if count > 0 and count & (count - 1) == 0 and slots % count == 0:
        blocks = np.flatnonzero(whole.reshape(slots // count, count).all(axis=1))
        if len(blocks):
            return np.arange(blocks[0] * count, blocks[0] * count + count)
    return np.flatnonzero(whole)[:count]


def take(nodes: Nodes, request: Request, node: int, gpu: int) -> np.ndarray:
    """Allocate the request on ``node`` (``gpu`` for a partial one); returns the GPU slots used."""
    slots = np.array([gpu]) if request.partial else whole_slots(nodes, node, request.gpus)
    if request.partial:
        if nodes.gpu_free[node, gpu] < request.gpu_milli:
            raise ValueError(f"GPU {gpu} of {nodes.names[node]} has {nodes.gpu_free[node, gpu]}/1000 free")
    elif len(slots) < request.gpus:
        raise ValueError(f"{nodes.names[node]} has {len(slots)} free GPUs, not {request.gpus}")
    nodes.gpu_free[node, slots] -= request.gpu_milli
    nodes.cpu_free[node] -= request.cpu_milli
    nodes.mem_free[node] -= request.mem_mib
    return slots
