"""PWR: the marginal power of a placement (Lettich et al., CCGrid'25, on the same trace).

Power of a node, from the models' GPU parameters (idle and maximum power of its GPU type):

- a node with nothing allocated is asleep and draws nothing (Slurm's power saving
  suspends it); a node in use draws ``node_w`` (CPUs, memory, fans; default 0, so a node
  costs what its GPUs cost) plus, per GPU,
- ``idle_w`` for a GPU with nothing on it, ``idle_w + (max_w - idle_w) * share`` for one
  with ``share`` of it allocated (a whole-GPU job: ``max_w``; Lettich et al. charge the
  full ``max_w`` for any share, the linear share is the models' busy-fraction view).

PWR scores an option by minus the node's power after minus before: waking a sleeping node
costs its GPUs' idle power plus the task's dynamic power, a free GPU on a node in use costs
only the dynamic power, a share of a GPU already busy the same, so busy nodes fill first.
"""

from __future__ import annotations

import numpy as np

from slurm_green.policy.placement.framework import MILLI, Nodes, Options, Request, free_after


def node_power_w(used: np.ndarray, exists: np.ndarray, idle_w: np.ndarray, max_w: np.ndarray,
                 node_w: float = 0.0) -> np.ndarray:
    """Power per node state: ``used`` milli per GPU slot [state, slot]; ``idle_w``/``max_w`` per state."""
    awake = (used > 0).any(axis=1)
    share = used / MILLI
    gpu_w = np.where(exists, idle_w[:, None] + (max_w - idle_w)[:, None] * share, 0.0).sum(axis=1)
    return np.where(awake, node_w + gpu_w, 0.0)


class Pwr:
    """Minus the placement's marginal power in watts (higher is better)."""

    def __init__(self, idle_w_by_model: np.ndarray, max_w_by_model: np.ndarray, node_w: float = 0.0) -> None:
        self.idle_w_by_model = np.asarray(idle_w_by_model, dtype=float)
        self.max_w_by_model = np.asarray(max_w_by_model, dtype=float)
        self.node_w = node_w

    def power_w(self, nodes: Nodes) -> np.ndarray:
        """Each node's power now."""
        return node_power_w(nodes.gpu_used, nodes.gpu_exists, self.idle_w_by_model[nodes.model],
                            self.max_w_by_model[nodes.model], self.node_w)

    def score(self, nodes: Nodes, request: Request, options: Options) -> np.ndarray:
        rows = options.node
        exists, free = nodes.gpu_exists[rows], nodes.gpu_free[rows]
        after = free_after(nodes, request, options)
        idle, top = self.idle_w_by_model[nodes.model[rows]], self.max_w_by_model[nodes.model[rows]]
        before_w = node_power_w(np.where(exists, MILLI - free, 0), exists, idle, top, self.node_w)
        after_w = node_power_w(np.where(exists, MILLI - after, 0), exists, idle, top, self.node_w)
        return before_w - after_w
