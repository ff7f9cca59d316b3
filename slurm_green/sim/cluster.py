"""The simulated cluster's shape: nodes, GPUs per node, switches, idle power.

Default sizes per trace aim at a realistic load (busy most of the time, with queues
at peaks) rather than at the original cluster, because the shared traces are
subsets: Pollux's Philly preprocessing keeps 82k jobs that average 374 busy GPUs,
while Philly itself had about 2,500. See docs/simulator.md for the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass


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

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_name(self, index: int) -> str:
        return f"{self.name_prefix}{index:04d}"

    def switch_of(self, index: int) -> str:
        return f"sw{index // self.nodes_per_switch}"


#: Per trace family: Philly 96 x 8 V100 (768 GPUs, ~49 % mean load); Pollux's own
#: evaluation cluster, 16 x 4 T4; Gavel's VC trace 16 x 8 (~47 % load); Alibaba 128 x 8.
DEFAULT_CLUSTERS = {
    "philly": ClusterSpec(nodes=96, gpus_per_node=8),
    "pollux": ClusterSpec(nodes=16, gpus_per_node=4, nodes_per_switch=4, gpu_type="t4", idle_w_per_gpu=10.0),
    "gavel": ClusterSpec(nodes=16, gpus_per_node=8, nodes_per_switch=4),
    "alibaba": ClusterSpec(nodes=128, gpus_per_node=8),
    "sacct": ClusterSpec(nodes=32, gpus_per_node=8),
}


def default_cluster(workload_name: str) -> ClusterSpec:
    family = workload_name.split("-", 1)[0]
    return DEFAULT_CLUSTERS.get(family, ClusterSpec(nodes=16, gpus_per_node=8))
