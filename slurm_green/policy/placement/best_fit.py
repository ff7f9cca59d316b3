"""Best fit: the node left with the least free CPU and GPU after the placement.

As the FGD authors' ``best_fit_score.go``: ``-(0.5 (cpu_free - cpu_req) / cpu_scale +
0.5 (gpu_free - gpu_req) / gpu_scale)``, with the scales the largest node's CPUs and GPUs
so both terms lie in [0, 1]. Among the GPUs of one node a partial request takes the one
it leaves with least free (best fit inside the node, too).
"""

from __future__ import annotations

import numpy as np

from slurm_green.policy.placement.framework import Nodes, Options, Request

#: Weight of the GPU left free on the chosen GPU itself: breaks ties inside a node only.
_INSIDE_NODE = 1e-6


class BestFit:
    """Least free resources after placement first."""

    def __init__(self, cpu_scale_milli: float, gpu_scale_milli: float) -> None:
        self.cpu_scale_milli = max(cpu_scale_milli, 1.0)
        self.gpu_scale_milli = max(gpu_scale_milli, 1.0)

    @classmethod
    def for_nodes(cls, nodes: Nodes) -> "BestFit":
        """Scaled to the largest node of ``nodes`` as they are now (call it on the empty cluster)."""
        return cls(float(nodes.cpu_free.max(initial=1)), float(nodes.gpu_free.sum(axis=1).max(initial=1)))

    def score(self, nodes: Nodes, request: Request, options: Options) -> np.ndarray:
        cpu_left = nodes.cpu_free[options.node] - request.cpu_milli
        gpu_left = nodes.gpu_free[options.node].sum(axis=1) - request.total_milli
        left = 0.5 * cpu_left / self.cpu_scale_milli + 0.5 * gpu_left / self.gpu_scale_milli
        if request.partial:
            left = left + _INSIDE_NODE * (nodes.gpu_free[options.node, options.gpu] - request.gpu_milli)
        return -left
