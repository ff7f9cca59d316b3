"""The Filter plugin: which nodes can take a request at all.

A node fits when it has the CPU and memory, runs one of the GPU models the request
allows, and has the GPUs: ``gpus`` fully free GPUs for a whole-GPU request, one GPU with
at least ``gpu_milli`` free for a partial one. Every scorer applies it before scoring, so
no Score plugin can place beyond capacity.
"""

from __future__ import annotations

import numpy as np

from slurm_green.policy.placement.framework import MILLI, Nodes, Request


class ResourceFit:
    """CPU, memory, GPU model and GPU capacity (Kubernetes' NodeResourcesFit plus the GPU-share filter)."""

    def feasible(self, nodes: Nodes, request: Request) -> np.ndarray:
        ok = (nodes.cpu_free >= request.cpu_milli) & (nodes.mem_free >= request.mem_mib)
        if request.models is not None:
            ok &= np.isin(nodes.model, list(request.models))
        if request.gpus == 0:
            return ok
        if request.partial:
            return ok & (nodes.gpu_exists & (nodes.gpu_free >= request.gpu_milli)).any(axis=1)
        whole = (nodes.gpu_exists & (nodes.gpu_free == MILLI)).sum(axis=1)
        return ok & (whole >= request.gpus)
