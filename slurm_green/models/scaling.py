"""How a job speeds up with GPUs and loses speed when spread over nodes.

Communication-cost model (the Pollux step-time model, in relative form): with the
per-GPU batch fixed, one step on ``g`` GPUs over ``n`` nodes takes the single-GPU
compute time ``Tc`` plus gradient synchronisation::

    T(g, n) = Tc * (slow(cap) + sigma(g, n))
    sigma(1, 1) = 0
    sigma(g, n) = a + b*(g - 2) + [n > 1] * (a_net + b_net*(n - 2))      (g >= 2)

so ``speedup = g / (1 + sigma)`` at full power. All four coefficients are >= 0
(no super-linear scaling, spreading never helps) and ``b <= (1 + a) / 2`` makes
throughput non-decreasing in ``g`` at a fixed node count. ``sigma`` is linear in
the coefficients, so the fit is a small non-negative least squares.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from slurm_green.models.profiles import ScalingRow


@dataclass(frozen=True, slots=True)
class ScalingParams:
    a: float = 0.0
    b: float = 0.0
    a_net: float = 0.0
    b_net: float = 0.0

    def sigma(self, gpus: int, nodes: int) -> float:
        """Synchronisation time in units of single-GPU compute time."""
        if gpus <= 1:
            return 0.0
        s = self.a + self.b * (gpus - 2)
        if nodes > 1:
            s += self.a_net + self.b_net * (nodes - 2)
        return s

    def speedup(self, gpus: int, nodes: int = 1) -> float:
        return gpus / (1.0 + self.sigma(gpus, nodes))


def _features(gpus: int, nodes: int) -> list[float]:
    spread = 1.0 if nodes > 1 else 0.0
    return [1.0, gpus - 2.0, spread, spread * (nodes - 2.0)]


def nnls(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Exact non-negative least squares for a handful of columns, by trying every active set."""
    best, best_err = np.zeros(design.shape[1]), float(np.sum(target**2))
    for k in range(1, design.shape[1] + 1):
        for cols in itertools.combinations(range(design.shape[1]), k):
            sol, *_ = np.linalg.lstsq(design[:, cols], target, rcond=None)
            if np.any(sol < 0):
                continue
            err = float(np.sum((design[:, cols] @ sol - target) ** 2))
            if err < best_err - 1e-15:
                best = np.zeros(design.shape[1])
                best[list(cols)] = sol
                best_err = err
    return best


def fit_scaling(rows: Sequence[ScalingRow], single_gpu_throughput: float) -> ScalingParams:
    """Fit the coefficients to measured multi-GPU throughputs (relative error weighted).

    Terms the rows cannot identify (no multi-node row, one node count) stay at 0.
    """
    multi = [r for r in rows if r.gpus > 1]
    if not multi:
        return ScalingParams()
    sigma_obs = np.array([r.gpus * single_gpu_throughput / r.throughput - 1.0 for r in multi])
    weight = 1.0 / (1.0 + np.maximum(sigma_obs, 0.0))  # error in sigma -> relative error in throughput
    design = np.array([_features(r.gpus, r.nodes) for r in multi])
    identifiable = [
        True,
        len({r.gpus for r in multi}) > 1,
        any(r.nodes > 1 for r in multi),
        len({r.nodes for r in multi if r.nodes > 1}) > 1,
    ]
    cols = [i for i, ok in enumerate(identifiable) if ok]
    coef = np.zeros(4)
    coef[cols] = nnls(design[:, cols] * weight[:, None], sigma_obs * weight)
    a, b, a_net, b_net = (float(c) for c in coef)
    return ScalingParams(a, min(b, (1.0 + a) / 2.0), a_net, b_net)
