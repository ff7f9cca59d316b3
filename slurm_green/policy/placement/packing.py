"""Packing: fill shared and used GPUs before waking free ones (FGD paper's "Packing" baseline).

Three tiers, as the FGD authors' simulator scores them (``gpu_packing_score.go``):
sharing a GPU already in use scores highest (the less it leaves free, the better);
then fully free GPUs on a node already in use (the fewer taken, the better); then a
node with every GPU free (the fewer GPUs it has, the better). CPU-only requests score 0.
"""

from __future__ import annotations

import numpy as np

from slurm_green.policy.placement.framework import MILLI, Nodes, Options, Request


class Packing:
    """Score tiers: shared GPU in [50, 100], free GPUs on a used node in [33, 50], an idle node in [0, 33]."""

    def score(self, nodes: Nodes, request: Request, options: Options) -> np.ndarray:
        if request.gpus == 0:
            return np.zeros(len(options))
        exists, free = nodes.gpu_exists[options.node], nodes.gpu_free[options.node]
        count = exists.sum(axis=1)
        idle_node = ((free == MILLI) | ~exists).all(axis=1)
        idle_tier = np.maximum(33.0 - count, count)  # the authors' cap, kept as they wrote it
        if not request.partial:
            return np.where(idle_node, idle_tier, np.maximum(50.0 - request.gpus, 33.0))
        on_gpu = free[np.arange(len(options)), options.gpu]
        shared = on_gpu < MILLI
        shared_tier = np.maximum(100.0 - on_gpu * 100 // MILLI / 10.0, 50.0)
        one_free_gpu_tier = max(50.0 - 1, 33.0)  # a share on a fully free GPU of a used node
        return np.where(idle_node, idle_tier, np.where(shared, shared_tier, one_free_gpu_tier))
