"""The simulated cluster's shape: nodes, GPUs per node, switches, idle power.

Default sizes per trace aim at a realistic load (busy most of the time, with queues
at peaks) rather than at the original cluster, because the shared traces are
subsets: Pollux's Philly preprocessing keeps 82k jobs that average 374 busy GPUs,
while Philly itself had about 2,500. See docs/simulator.md for the numbers.

A mixed cluster names each node's GPU type (``gpu_types``). Its users ask for a type,
as on a Slurm cluster with typed gres (``--gres=gpu:h100:2``): each trace job is given
one, drawn in proportion to each type's GPUs, and runs only on nodes of that type.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ClusterSpec:
    nodes: int
    gpus_per_node: int
    #: Nodes under one leaf switch (network packing keeps a job under one).
    nodes_per_switch: int = 16
    gpu_type: str = "v100"
    #: Power of an idle GPU, watts: reported separately from the jobs' energy.
    idle_w_per_gpu: float = 30.0
    #: How jobs share a GPU (``ShareGpus``): ``timeslice`` (gres/shard) or ``mps`` (gres/mps).
    share_mechanism: str = "timeslice"
    name_prefix: str = "sim"
    #: Each node's GPU type, in node order, on a mixed cluster; empty: every node is ``gpu_type``.
    gpu_types: tuple[str, ...] = ()
    #: Seed of the draw of each trace job's requested type on a mixed cluster.
    type_seed: int = 0
    #: On a mixed cluster, the share of trace jobs that ask for no GPU type (plain ``gres/gpu``:
    #: they run on any node, with the models of the type they land on), drawn with ``type_seed``.
    untyped_share: float = 0.0
    #: Slurm's power saving (``sim/power_saving.py``): a node idle this long is suspended
    #: (SuspendTime, seconds; None: never), and a job that lands on it waits ``resume_s``.
    suspend_after_s: float | None = None
    resume_s: float = 300.0

    def __post_init__(self) -> None:
        if self.gpu_types and len(self.gpu_types) != self.nodes:
            raise ValueError(f"gpu_types names {len(self.gpu_types)} nodes, the cluster has {self.nodes}")
        if not 0.0 <= self.untyped_share <= 1.0:
            raise ValueError(f"untyped_share is a share of the jobs, from 0 to 1, not {self.untyped_share}")

    @classmethod
    def mixed(cls, nodes: int, gpus_per_node: int, types: tuple[str, ...], **kwargs: Any) -> ClusterSpec:
        """``nodes`` split into equal consecutive blocks, one per type (the first blocks take any remainder);
        ``kwargs``: the other fields of ``ClusterSpec``."""
        per, extra = divmod(nodes, len(types))
        names = tuple(t for k, t in enumerate(types) for _ in range(per + (k < extra)))
        return cls(nodes=nodes, gpus_per_node=gpus_per_node, gpu_type=types[0], gpu_types=names, **kwargs)

    @property
    def typed(self) -> bool:
        """Whether nodes differ in GPU type (jobs then ask for one)."""
        return bool(self.gpu_types)

    def type_of(self, index: int) -> str:
        return self.gpu_types[index] if self.gpu_types else self.gpu_type

    def gpus_of_type(self) -> dict[str, int]:
        counts = Counter(self.gpu_types or (self.gpu_type,) * self.nodes)
        return {t: c * self.gpus_per_node for t, c in counts.items()}

    def requested_types(self, jobs: int) -> list[str | None]:
        """Each trace job's requested GPU type: on a mixed cluster drawn (seeded) in
        proportion to each type's GPUs, or None (any type) for a share ``untyped_share``
        of them; else the cluster's one type."""
        if not self.typed:
            return [self.gpu_type] * jobs
        gpus = self.gpus_of_type()
        names = sorted(gpus)
        share = np.array([gpus[t] for t in names], dtype=float)
        rng = np.random.default_rng(self.type_seed)
        draw = rng.choice(len(names), size=jobs, p=share / share.sum())
        untyped = rng.random(jobs) < self.untyped_share if self.untyped_share else np.zeros(jobs, dtype=bool)
        return [None if any_type else names[k] for k, any_type in zip(draw.tolist(), untyped.tolist(), strict=True)]

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_name(self, index: int) -> str:
        return f"{self.name_prefix}{index:04d}"

    def switch_of(self, index: int) -> str:
        return f"sw{index // self.nodes_per_switch}"


#: Per trace family: Philly 96 x 8 V100 (768 GPUs, ~49 % mean load); Pollux's own
#: evaluation cluster, 16 x 4 (T4s there: their 10 W idle draw); Gavel's VC trace 16 x 8
#: (~47 % load); Alibaba 128 x 8. A single-type cluster's jobs run with the registry's own
#: type's models (the Pollux job types are fitted there, T4-like draws included), so its
#: nodes report that type: policies plan with the models jobs run with.
DEFAULT_CLUSTERS = {
    "philly": ClusterSpec(nodes=96, gpus_per_node=8),
    "pollux": ClusterSpec(nodes=16, gpus_per_node=4, nodes_per_switch=4, idle_w_per_gpu=10.0),
    "gavel": ClusterSpec(nodes=16, gpus_per_node=8, nodes_per_switch=4),
    "alibaba": ClusterSpec(nodes=128, gpus_per_node=8),
    "sacct": ClusterSpec(nodes=32, gpus_per_node=8),
}


def default_cluster(workload_name: str) -> ClusterSpec:
    family = workload_name.split("-", 1)[0]
    return DEFAULT_CLUSTERS.get(family, ClusterSpec(nodes=16, gpus_per_node=8))
