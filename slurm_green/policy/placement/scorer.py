"""One scorer from site weights: filter, score with each plugin, normalise, weight, choose.

Each plugin's scores are min-max normalised over the request's options to [0, 1] (all
equal: 1), as the Kubernetes framework's NormalizeScore step and Lettich et al.'s
PWR+FGD do, then summed with the site's weights; the best option wins, ties going to
the lowest node index (callers that want random ties shuffle the node order once).

Plugin names: ``packing``, ``best_fit``, ``buddy``, ``fgd``, ``pwr``, ``random``.
``SCORERS`` names the weight sets the benchmarks compare; a site passes its own dict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from slurm_green.policy.placement.best_fit import BestFit
from slurm_green.policy.placement.buddy import Buddy
from slurm_green.policy.placement.fgd import Fgd, Workload
from slurm_green.policy.placement.filters import ResourceFit
from slurm_green.policy.placement.framework import FilterPlugin, Nodes, Request, ScorePlugin, options_for, take
from slurm_green.policy.placement.packing import Packing
from slurm_green.policy.placement.pwr import Pwr
from slurm_green.policy.placement.random_score import RandomScore


@dataclass(frozen=True)
class Context:
    """What plugins need beyond the request: the target workload (FGD), GPU power per model
    (PWR, from the models: ``sim.openb.gpu_power_by_model``), the empty cluster (best fit's
    scales) and a seed (random)."""

    empty: Nodes
    workload: Workload | None = None
    idle_w_by_model: np.ndarray | None = None
    max_w_by_model: np.ndarray | None = None
    seed: int = 0


def _fgd(context: Context) -> ScorePlugin:
    if context.workload is None:
        raise ValueError("placement plugin 'fgd' needs the target workload")
    return Fgd(context.workload)


def _pwr(context: Context) -> ScorePlugin:
    if context.idle_w_by_model is None or context.max_w_by_model is None:
        raise ValueError("placement plugin 'pwr' needs the GPU power per model")
    return Pwr(context.idle_w_by_model, context.max_w_by_model)


PLUGINS: dict[str, Callable[[Context], ScorePlugin]] = {
    "packing": lambda context: Packing(),
    "best_fit": lambda context: BestFit.for_nodes(context.empty),
    "buddy": lambda context: Buddy(),
    "fgd": _fgd,
    "pwr": _pwr,
    "random": lambda context: RandomScore(context.seed),
}

#: The weight sets compared on the Alibaba trace (benchmarks/placement_fgd.py).
SCORERS: dict[str, dict[str, float]] = {
    "fgd": {"fgd": 1.0},
    "pwr": {"pwr": 1.0},
    "pwr+fgd": {"pwr": 0.5, "fgd": 0.5},
    "best-fit": {"best_fit": 1.0},
    "packing": {"packing": 1.0},
    "random": {"random": 1.0},
}


def normalised(raw: np.ndarray) -> np.ndarray:
    """``raw`` scaled to [0, 1] over the options; all equal (or one option) gives 1."""
    low, high = raw.min(), raw.max()
    if high - low <= 1e-12 * max(1.0, abs(high)):
        return np.ones_like(raw, dtype=float)
    return (raw - low) / (high - low)


class Scorer:
    """Filter plugins, then the weighted sum of normalised Score plugins."""

    def __init__(self, plugins: list[tuple[ScorePlugin, float]], filters: list[FilterPlugin] | None = None) -> None:
        if not plugins or any(w < 0 for _, w in plugins) or sum(w for _, w in plugins) <= 0:
            raise ValueError("a scorer needs at least one plugin and non-negative weights with a positive sum")
        self.plugins = plugins
        self.filters = filters if filters is not None else [ResourceFit()]

    @classmethod
    def from_weights(cls, weights: Mapping[str, float], context: Context) -> "Scorer":
        """``{"pwr": 0.5, "fgd": 0.5}`` -> a scorer; an unknown name is refused with the known ones."""
        unknown = sorted(set(weights) - set(PLUGINS))
        if unknown:
            raise ValueError(f"unknown placement plugin(s) {', '.join(unknown)}; choose from {', '.join(PLUGINS)}")
        return cls([(PLUGINS[name](context), float(w)) for name, w in weights.items() if w > 0])

    def choose(self, nodes: Nodes, request: Request, allowed: np.ndarray | None = None) -> tuple[int, int] | None:
        """The best (node index, GPU slot or -1) for the request, on ``allowed`` nodes (bool per
        node; None: any), or ``None`` when no node fits."""
        feasible = np.ones(len(nodes.names), dtype=bool) if allowed is None else allowed.copy()
        for plugin in self.filters:
            feasible &= plugin.feasible(nodes, request)
        options = options_for(nodes, request, feasible)
        if not len(options):
            return None
        total = np.zeros(len(options))
        for scorer, weight in self.plugins:
            total += weight * normalised(scorer.score(nodes, request, options))
        best = int(np.argmax(total))
        return int(options.node[best]), int(options.gpu[best])

    def place(self, nodes: Nodes, request: Request) -> tuple[int, np.ndarray] | None:
        """Choose and allocate: (node index, GPU slots taken), or ``None`` (nothing changed)."""
        chosen = self.choose(nodes, request)
        if chosen is None:
            return None
        return chosen[0], take(nodes, request, *chosen)
