"""An immutable snapshot of a cluster: jobs, nodes and partitions.

Backends (the real Slurm adapter and the simulator) produce a ``ClusterSnapshot``;
policies only read one. Times are POSIX seconds (float, UTC) because policies and
the simulator do arithmetic on them in tight loops; convert at the edges.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class JobState(str, enum.Enum):
    """Slurm's base job states (flags such as REQUEUED are dropped)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    OTHER = "OTHER"

    @classmethod
    def parse(cls, text: str) -> "JobState":
        try:
            return cls(text.upper())
        except ValueError:
            return cls.OTHER

    @property
    def is_active(self) -> bool:
        """Holds or will hold resources: what a scheduler must still account for."""
        return self in (JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED, JobState.COMPLETING)


@dataclass(frozen=True, slots=True)
class Job:
    """One job as the scheduler sees it.

    ``gpus_per_node`` counts whole GPUs; ``shards_per_node`` counts ``gres/shard``
    units (a GPU shared with other jobs). ``comment`` (and ``name``) are user-writable and
    therefore untrusted; ``admin_comment`` only an administrator can set.
    """

    job_id: int
    name: str = ""
    user: str = ""
    account: str = ""
    partition: str = ""
    state: JobState = JobState.PENDING
    state_reason: str = ""
    submit_time: float = 0.0
    eligible_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    time_limit_s: float | None = None
    num_nodes: int = 1
    gpus_per_node: int = 0
    shards_per_node: int = 0
    gpu_type: str | None = None
    nodes: tuple[str, ...] = ()
    priority: int = 0
    nice: int = 0
    held: bool = False
    comment: str = ""
    admin_comment: str = ""
    #: Slurm ``TresFreq`` (``--gpu-freq``), e.g. ``gpu:medium``; empty if unset.
    tres_freq: str = ""
    #: The job's whole per-node GRES request as Slurm shows it (``tres_per_node``, e.g.
    #: ``gres/gpu:4,gres/nvme:1``; user-written, untrusted), so a change of its GPUs keeps
    #: the other entries; empty if none or unknown (the simulator).
    tres_per_node: str = ""
    #: Whether the job asks its GPUs (and shards) per node alone (``--gres``,
    #: ``--gpus-per-node``: ``tres_per_node``), the one form a ``Gres=`` update rewrites. False
    #: where it asks them per job (``--gpus``), per task or per socket: Slurm refuses ``Gres=`` on
    #: a ``--gpus`` job (``Invalid generic resource (gres) specification``, 24.11) and takes it on
    #: a ``--gpus-per-task`` one by raising its task count, so no decision resizes or shares such
    #: a job (``planner.within_partition``, ``planner.sharing_allowed``). True where unknown (the
    #: simulator asks per node).
    gpus_per_node_only: bool = True
    #: CPUs the job asks for (pending) or holds, over all its nodes (``NumCPUs``); 0 where not
    #: known, and for an ended job.
    cpus: int = 0
    #: Memory the job asks for (pending) or holds, in MiB over all its nodes (the ``mem`` of its
    #: TRES); 0 where not known, and for an ended job.
    memory_mib: int = 0
    #: CPUs and memory (MiB) the job asks per GPU (``--cpus-per-gpu``, ``--mem-per-gpu``: Slurm's
    #: ``cpus_per_tres``/``memory_per_tres``); 0 where none. Such a job's CPUs and memory grow with its GPUs (``cpus_per_node_at``).
    cpus_per_gpu: int = 0
    memory_per_gpu_mib: int = 0
    #: Slurm's own ``--deadline`` (POSIX seconds): Slurm cancels the job (``DEADLINE``) once it
    #: cannot end by then within its limit; None where none.
    deadline: float | None = None
    #: The advance reservation Slurm runs the job in (``--reservation``); empty if none. Its nodes and hours are the reservation's, so its start
    #: is Slurm's to choose (``planner.started_as_reserved``).
    reservation: str = ""

    @property
    def total_gpus(self) -> int:
        return self.num_nodes * self.gpus_per_node

    @property
    def cpus_per_node(self) -> int:
        """The CPUs the job needs on each of its nodes (at least 1: every job takes one)."""
        return max(1, -(-self.cpus // max(1, self.num_nodes)))

    @property
    def memory_per_node_mib(self) -> int:
        """The memory (MiB) the job needs on each of its nodes; 0 where not known."""
        return -(-self.memory_mib // max(1, self.num_nodes))

    def cpus_per_node_at(self, gpus_per_node: int) -> int:
        """The CPUs the job needs on each node with ``gpus_per_node`` GPUs there: its CPUs per
        GPU times that where it asks per GPU, else what it asks now."""
        return self.cpus_per_gpu * gpus_per_node if self.cpus_per_gpu > 0 else self.cpus_per_node

    def memory_per_node_mib_at(self, gpus_per_node: int) -> int:
        """As ``cpus_per_node_at``, for memory (MiB; 0 where not known)."""
        return self.memory_per_gpu_mib * gpus_per_node if self.memory_per_gpu_mib > 0 else self.memory_per_node_mib

    @property
    def is_pending(self) -> bool:
        return self.state is JobState.PENDING


class NodeState(str, enum.Enum):
    """Slurm's base node states."""

    IDLE = "IDLE"
    MIXED = "MIXED"
    ALLOCATED = "ALLOCATED"
    DOWN = "DOWN"
    ERROR = "ERROR"
    FUTURE = "FUTURE"
    UNKNOWN = "UNKNOWN"

    @classmethod
    def parse(cls, text: str) -> "NodeState":
        try:
            return cls(text.upper())
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class Node:
    """One compute node. ``flags`` holds Slurm's state flags (DRAIN, NOT_RESPONDING, ...)."""

    name: str
    state: NodeState = NodeState.IDLE
    flags: frozenset[str] = frozenset()
    reason: str = ""
    gpus_total: int = 0
    gpus_allocated: int = 0
    gpu_indices_allocated: tuple[int, ...] = ()
    gpu_type: str | None = None
    shards_total: int = 0
    shards_allocated: int = 0
    features: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    #: CPUs Slurm schedules on the node (``cpus``) and those allocated (``alloc_cpus``); 0 and
    #: 0 where not known (the simulator): a node with its GPUs free and its CPUs all taken by
    #: CPU jobs can start no GPU job (``planner.where_jobs_fit``).
    cpus_total: int = 0
    cpus_allocated: int = 0
    #: Memory Slurm schedules on the node (``RealMemory``) and that allocated, in MiB; 0 and 0
    #: where not known. Where memory is a consumable resource (``CR_*_Memory``), a node whose
    #: memory other jobs hold can start no job either, whatever its GPUs and CPUs.
    memory_total_mib: int = 0
    memory_allocated_mib: int = 0

    @property
    def cpus_free(self) -> int | None:
        """CPUs not allocated; None where the node's CPUs are not known."""
        return max(0, self.cpus_total - self.cpus_allocated) if self.cpus_total > 0 else None

    @property
    def memory_free_mib(self) -> int | None:
        """Memory (MiB) not allocated; None where the node's memory is not known."""
        return max(0, self.memory_total_mib - self.memory_allocated_mib) if self.memory_total_mib > 0 else None

    @property
    def available(self) -> bool:
        """Can accept new work: up, responding and not being drained."""
        bad_flags = {"DRAIN", "DRAINING", "DRAINED", "NOT_RESPONDING", "POWERED_DOWN", "MAINTENANCE", "RESERVED"}
        return self.state in (NodeState.IDLE, NodeState.MIXED, NodeState.ALLOCATED) and not (self.flags & bad_flags)

    @property
    def starts_jobs(self) -> bool:
        """Has a CPU and some memory free, where those are known: every job takes at least one
        of each, so a node whose CPUs or memory other (CPU-only) jobs hold all of starts none,
        whatever GPUs it shows free. Its GPUs then count as taken (``gpus_free``), as they are
        until those jobs end; they still count in the cluster's size (``ClusterSnapshot.gpus_total``)."""
        return self.cpus_free != 0 and self.memory_free_mib != 0

    @property
    def gpus_free(self) -> int:
        return max(0, self.gpus_total - self.gpus_allocated) if self.available and self.starts_jobs else 0


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    nodes: tuple[str, ...] = ()
    state: str = "UP"
    default: bool = False
    max_time_s: float | None = None
    #: ``DefaultTime``: the limit a job submitted without ``--time`` gets (None: none set, and
    #: such a job gets ``MaxTime``).
    default_time_s: float | None = None
    #: ``MaxNodes``: the most nodes one job may have there (None: unlimited). A job given more
    #: stays pending (``Reason=PartitionNodeLimit``) until someone shrinks it.
    max_nodes: int | None = None
    #: ``OverSubscribe=EXCLUSIVE``: every job takes the nodes it runs on whole (``scontrol show
    #: partitions`` prints it so up to 24.11, as ``Exclusive=NODE`` on 26.05).
    exclusive: bool = False


@dataclass(frozen=True, slots=True)
class Reservation:
    """An advance reservation (``scontrol create reservation``): its nodes are kept from
    ``start`` to ``end`` (POSIX seconds) for the jobs that run in it (``Job.reservation``), so
    Slurm starts no other job there whose time limit reaches into those hours: a maintenance, or
    hours someone booked."""

    name: str
    start: float
    end: float
    nodes: tuple[str, ...] = ()

    def overlaps(self, start: float, end: float) -> bool:
        """Whether the reservation holds its nodes at some time in ``[start, end)``."""
        return self.start < end and start < self.end


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """A consistent view of the cluster at ``taken_at`` (POSIX seconds)."""

    taken_at: float
    slurm_version: str = ""
    jobs: tuple[Job, ...] = ()
    nodes: tuple[Node, ...] = ()
    partitions: tuple[Partition, ...] = ()
    #: Advance reservations not yet ended; empty where none, or not known (the simulator).
    reservations: tuple[Reservation, ...] = ()
    _job_index: dict[int, Job] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._job_index.update({job.job_id: job for job in self.jobs})

    def job(self, job_id: int) -> Job | None:
        return self._job_index.get(job_id)

    def pending(self) -> tuple[Job, ...]:
        return tuple(job for job in self.jobs if job.state is JobState.PENDING)

    def running(self) -> tuple[Job, ...]:
        return tuple(job for job in self.jobs if job.state is JobState.RUNNING)

    @property
    def gpus_total(self) -> int:
        return sum(node.gpus_total for node in self.nodes if node.available)

    @property
    def gpus_free(self) -> int:
        return sum(node.gpus_free for node in self.nodes)
