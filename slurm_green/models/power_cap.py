"""How a GPU power cap changes a job's speed and power draw (fitted on the Zeus sweeps).

Per GPU type: board limit ``tdp_w``, ``idle_w``, the ratio of drawn power to the cap
when the cap binds (``draw_ratio``; the firmware keeps the average a little under
the limit), the sharpness ``exponent`` and the lowest settable cap.
Per job: its natural (uncapped) power as a fraction of TDP, ``u``, and its
sensitivity ``beta`` (0 for jobs bound by memory, input or the CPU).

    r(c)    = min(1, draw_ratio * c / u)                  # how much the cap bites
    slow(c) = 1 + beta * (r**-exponent - 1)               # compute time stretch, >= 1
    P(c)    = max(idle, tdp * u * r)                      # busy board power, W

``slow`` falls and ``P`` rises with ``c``, so a lower cap never speeds a job up and
power stays within [idle, TDP]. The inverse-power form is what DVFS gives once the
voltage floor is reached: power falls about linearly with clock, time rises as 1/clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from slurm_green.models.profiles import CapRow


@dataclass(frozen=True, slots=True)
class GpuPowerParams:
    name: str
    tdp_w: float
    idle_w: float
    draw_ratio: float
    exponent: float
    cap_min: float


@dataclass(frozen=True, slots=True)
class CapParams:
    natural_power_fraction: float
    beta: float


def bite(gpu: GpuPowerParams, cap: CapParams, cap_fraction: float) -> float:
    c = min(1.0, max(gpu.cap_min, cap_fraction))
    return min(1.0, gpu.draw_ratio * c / cap.natural_power_fraction)


def slowdown(gpu: GpuPowerParams, cap: CapParams, cap_fraction: float) -> float:
    return 1.0 + cap.beta * (bite(gpu, cap, cap_fraction) ** -gpu.exponent - 1.0)


def busy_power_w(gpu: GpuPowerParams, cap: CapParams, cap_fraction: float) -> float:
    return max(gpu.idle_w, gpu.tdp_w * cap.natural_power_fraction * bite(gpu, cap, cap_fraction))


def capped_board_w(gpu: GpuPowerParams,
                   cap_fraction: float | Sequence[float] | np.ndarray | None) -> np.ndarray | float:
    """The most a board of ``gpu`` draws, whatever runs on it, under ``cap_fraction`` (None: no
    cap, its maximum): the firmware holds the average at ``draw_ratio`` of the limit, never
    under idle, as ``busy_power_w`` does for one job; caps under the settable range are taken
    as its lowest. A cap of 1.0 (or more) is no cap: the Prolog leaves the board's own limit
    (``gpu/enact.py``), so it is bounded by its maximum as with None, and a policy pricing
    caps up to 1.0 prices full power as the simulator charges it. What bounds two jobs
    sharing the GPU (``colocation.pair_power_w``)."""
    if cap_fraction is None:
        return gpu.tdp_w
    c = np.maximum(np.asarray(cap_fraction, dtype=float), gpu.cap_min)
    return np.where(c >= 1.0, gpu.tdp_w, np.minimum(gpu.tdp_w, np.maximum(gpu.idle_w, gpu.tdp_w * gpu.draw_ratio * c)))


def natural_fraction(rows: Sequence[CapRow], tdp_w: float) -> float:
    """Uncapped draw: the power at the highest limit, which is where the cap binds least."""
    return min(1.0, rows[-1].power_w / tdp_w)


def fit_beta(rows: Sequence[CapRow], gpu: GpuPowerParams, u: float) -> float:
    """Least-squares ``beta`` (>= 0) of the time stretch against the highest-limit row."""
    cap = CapParams(u, 1.0)
    x = np.array([bite(gpu, cap, r.cap_fraction) ** -gpu.exponent - 1.0 for r in rows])
    y = np.array([r.time_s / rows[-1].time_s - 1.0 for r in rows])
    denom = float(x @ x)
    return max(0.0, float(x @ y) / denom) if denom > 1e-12 else 0.0


def scaled_to_board(gpu: GpuPowerParams, name: str, max_w: float, min_w: float | None = None) -> GpuPowerParams:
    """``gpu``'s fitted shape on a board with another limit: idle scales with the board,
    the lowest cap is the board's own minimum when known (else ``gpu``'s fraction)."""
    scale = max_w / gpu.tdp_w
    cap_min = min(1.0, min_w / max_w) if min_w is not None and max_w > 0 else gpu.cap_min
    return replace(gpu, name=name, tdp_w=max_w, idle_w=gpu.idle_w * scale, cap_min=cap_min)


def fit_gpu(name: str, tdp_w: float, groups: Mapping[Any, Sequence[CapRow]],
            idle_w: float | None = None) -> GpuPowerParams:
    """Fit one GPU's shared constants on all of its (network, batch) sweeps.

    ``idle_w``: measured idle when given (the H100 data has it), else the lowest average
    power any profiled training job drew (an upper bound on true idle, so it never
    flatters a low cap). ``draw_ratio``: median of
    power / limit where the cap clearly binds. ``exponent``: grid search minimising
    the squared time-stretch error after fitting each job's ``beta``.
    """
    all_rows = [r for rows in groups.values() for r in rows]
    idle_w = idle_w if idle_w is not None else min(r.power_w for r in all_rows)
    binding = [
        r.power_w / (r.cap_fraction * tdp_w)
        for rows in groups.values()
        for r in rows
        if r.cap_fraction * tdp_w < rows[-1].power_w * 0.85
    ]
    draw_ratio = float(np.median(binding)) if binding else 1.0
    cap_min = min(r.cap_fraction for r in all_rows)
    # Flatten every sweep into arrays so the exponent grid search is a few numpy passes.
    ids, caps, stretch, u = [], [], [], []
    for i, rows in enumerate(groups.values()):
        for r in rows:
            ids.append(i)
            caps.append(r.cap_fraction)
            stretch.append(r.time_s / rows[-1].time_s - 1.0)
            u.append(natural_fraction(rows, tdp_w))
    gid, y = np.array(ids), np.array(stretch)
    bite_all = np.minimum(1.0, draw_ratio * np.maximum(np.array(caps), cap_min) / np.array(u))
    best_err, best_exp = np.inf, 1.0
    for exponent in np.arange(0.5, 8.01, 0.1):
        x = bite_all**-exponent - 1.0
        sxx, sxy = np.bincount(gid, x * x), np.bincount(gid, x * y)
        beta = np.where(sxx > 1e-12, np.maximum(0.0, sxy / np.where(sxx > 1e-12, sxx, 1.0)), 0.0)
        err = float(np.sum((beta[gid] * x - y) ** 2))
        if err < best_err:
            best_err, best_exp = err, float(exponent)
    return GpuPowerParams(name, tdp_w, idle_w, draw_ratio, round(best_exp, 2), cap_min)


def fit_job(rows: Sequence[CapRow], gpu: GpuPowerParams) -> CapParams:
    u = natural_fraction(rows, gpu.tdp_w)
    return CapParams(u, fit_beta(rows, gpu, u))
