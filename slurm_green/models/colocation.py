"""Co-location interference: how much two jobs slow each other down sharing one GPU.

Read from Gavel's pair measurements: when ``a`` and ``b`` share a GPU, ``a`` runs at
``tput_a_shared`` steps/s instead of ``tput_a_alone``. The slowdown of ``a`` is
``tput_a_alone / tput_a_shared`` (>= 1 normally; ``inf`` when the pair does not fit
in memory, which Gavel records as 0.0). EaCO co-locates when both are small.

The H100 run measured the same pairs under both of Slurm's sharing mechanisms
(time-slicing for ``gres/shard``, CUDA MPS for ``gres/mps``) with the board's power:
it fits ``LoadModel``, which predicts a pair from each job's power alone (how GPU-heavy
it is) for the jobs no table covers, and every pair's power.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

Pair = tuple[float, float]


def pair_slowdowns(
    alone: Mapping[str, float], shared: Mapping[tuple[str, str], tuple[float, float]]
) -> dict[tuple[str, str], Pair]:
    """``(a, b) -> (slow_a, slow_b)`` for every measured pair."""
    out = {}
    for (a, b), (tput_a, tput_b) in shared.items():
        if a in alone and b in alone:
            slow_a = alone[a] / tput_a if tput_a > 0 else math.inf
            slow_b = alone[b] / tput_b if tput_b > 0 else math.inf
            out[(a, b)] = (slow_a, slow_b)
    return out


#: The sharing mechanisms a site can enable: ``timeslice`` (Slurm ``gres/shard``: two
#: processes on one GPU, the driver's time-slicing) and ``mps`` (``gres/mps``, CUDA MPS).
MECHANISMS = ("timeslice", "mps")


@dataclass(frozen=True, slots=True)
class LoadModel:
    """Co-location from how GPU-heavy each job is, for pairs nobody measured.

    A job's heaviness ``h`` is its dynamic power share on its board,
    ``(P - idle) / (max - idle)`` (the job's measured power from telemetry, or its model's):
    a light job leaves the GPU idle much of the time and slows its partner little. Each job's
    slowdown is ``1 + k * h_partner**p``, fitted as an upper envelope (a high quantile) of
    the measured pairs, so it over-states more often than it under-states; the job's own
    heaviness is left out on purpose (a light job beside a heavy one is then over-stated).
    The pair's power is ``idle + power_scale * (dyn_a / slow_a + dyn_b / slow_b)``, at most
    the board's maximum (under a cap, what the capped board draws, which slows both jobs where
    it binds: ``clip_stretch``): each job draws its dynamic power for the share of time it progresses.
    """

    k: float
    p: float
    power_scale: float

    def slowdown(self, h_partner: np.ndarray | float) -> np.ndarray:
        return 1.0 + self.k * np.clip(np.asarray(h_partner, dtype=float), 0.0, 1.0) ** self.p


def heaviness(power_w: np.ndarray | float, idle_w: float, max_w: float) -> np.ndarray:
    """The dynamic power share of one GPU, in [0, 1]."""
    return np.clip((np.asarray(power_w, dtype=float) - idle_w) / (max_w - idle_w), 0.0, 1.0)


def pair_power_w(power_a: np.ndarray | float, power_b: np.ndarray | float, slow_a: np.ndarray | float,
                 slow_b: np.ndarray | float, idle_w: float, max_w: np.ndarray | float, scale: float) -> np.ndarray:
    """One shared GPU's power (W) from each job's power alone on it and their slowdowns, at most
    ``max_w``: the board's maximum, or what it draws under the cap it runs at (``capped_board_w``)."""
    dyn = (np.maximum(np.asarray(power_a, dtype=float) - idle_w, 0.0) / np.asarray(slow_a, dtype=float)
           + np.maximum(np.asarray(power_b, dtype=float) - idle_w, 0.0) / np.asarray(slow_b, dtype=float))
    return np.clip(idle_w + scale * dyn, idle_w, max_w)


#: The deepest clip (``clip_stretch``'s ratio) a pair has run under, per mechanism, with no time lost to it
#: beyond what the models give: the four capped H100 pairs under MPS (``benchmarks/h100_pair.py``,
#: ``benchmarks/h100/results/hooks.csv``; resnet18 with recommendation at 0.35, its 327 W bounded at
#: 244 W, ratio 1.53, stretched 0.84 / 1.12 against 1.00 / 1.20 predicted). No time-sliced pair
#: has been measured under a clip (the two in ``hooks_timeslice.csv`` drew under theirs): 1.0.
MEASURED_CLIP = {"timeslice": 1.0, "mps": 1.53}


def clip_stretch(demand_w: np.ndarray | float, max_w: np.ndarray | float, idle_w: float,
                 measured: float = 1.0) -> np.ndarray:
    """How many times longer both jobs of a pair run because the bound ``max_w`` (a cap's,
    ``power_cap.capped_board_w``) is under the power the pair would draw (``demand_w``,
    ``pair_power_w`` at the board's maximum): the firmware lowers the clocks to hold the limit,
    so the pair does its work at the dynamic power the bound leaves. The clip's ratio is
    ``(demand - idle) / (max_w - idle)`` (``inf`` when the bound leaves no dynamic power).
    What a clip deeper than ``measured`` (``MEASURED_CLIP``) costs no measurement shows, so
    beyond it the clip costs time and saves nothing: the stretch is ``ratio / measured`` (at
    least 1), and the pair's dynamic energy per unit of work stays what it is at ``measured``'s
    depth (with nothing measured, unclipped)."""
    demand = np.maximum(np.asarray(demand_w, dtype=float) - idle_w, 0.0)
    allowed = np.maximum(np.asarray(max_w, dtype=float) - idle_w, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(demand > allowed, demand / allowed, 1.0)
    return np.maximum(ratio / measured, 1.0)


def fit_load(h_partner: np.ndarray, slowdown: np.ndarray, quantile: float = 0.9) -> tuple[float, float]:
    """``(k, p)``: for each exponent of a grid, ``k`` the ``quantile`` of ``(slow - 1) / h**p``
    (so that share of the points lies under the curve); the exponent whose envelope is closest
    to the points (mean absolute error) wins."""
    h = np.clip(np.asarray(h_partner, dtype=float), 1e-3, 1.0)
    excess = np.maximum(np.asarray(slowdown, dtype=float) - 1.0, 0.0)
    best = (math.inf, 1.0, 1.0)
    for p in np.arange(0.25, 2.01, 0.05):
        k = float(np.quantile(excess / h**p, quantile))
        error = float(np.abs(1.0 + k * h**p - 1.0 - excess).mean())
        if error < best[0]:
            best = (error, k, float(p))
    return best[1], round(best[2], 2)


def fit_power_scale(power_a: np.ndarray, power_b: np.ndarray, slow_a: np.ndarray, slow_b: np.ndarray,
                    measured_w: np.ndarray, idle_w: float) -> float:
    """Least-squares ``scale`` of the pairs' dynamic power (through the origin)."""
    predicted = pair_power_w(power_a, power_b, slow_a, slow_b, idle_w, math.inf, 1.0) - idle_w
    measured = np.asarray(measured_w, dtype=float) - idle_w
    return float((predicted * measured).sum() / (predicted**2).sum())
