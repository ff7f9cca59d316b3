"""Buddy: prefer nodes where a power-of-two request gets an aligned block of free GPUs.

2 GPUs at 0-1/2-3/..., 4 at 0-3/4-7: blocks freed later merge back into larger aligned
blocks (``network.FreeGpus`` does the same for GreenFlow). The slots themselves are
chosen by ``framework.whole_slots``, which takes the aligned block whenever a node has
one; this plugin only steers requests to such nodes. Other requests score 0.
"""

from __future__ import annotations

import numpy as np

from slurm_green.policy.placement.framework import MILLI, Nodes, Options, Request


class Buddy:
    """1 where the node has an aligned fully free block of the request's size, else 0."""

    def score(self, nodes: Nodes, request: Request, options: Options) -> np.ndarray:
        k = request.gpus
        slots = nodes.gpu_free.shape[1]
        if request.partial or k <= 1 or k & (k - 1) or slots % k:
            return np.zeros(len(options))
        whole = nodes.gpu_exists[options.node] & (nodes.gpu_free[options.node] == MILLI)
        return whole.reshape(len(options), slots // k, k).all(axis=2).any(axis=1).astype(float)
