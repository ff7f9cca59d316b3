"""The least carbon intensity a run of a given length can integrate, starting at or after a time: exact.

A carbon bound needs, per job and configuration, ``min over s >= earliest of the
integral of intensity over [s, s + runtime]``. The intensity is piecewise constant (the
signal's periods; before its start the first value holds, after its end the last), so
that integral is piecewise linear in ``s`` with kinks only where the start or the end
crosses a period boundary. The minimum is therefore at ``earliest``, at a boundary
(an *aligned* start) or at a boundary minus the runtime (an *end-aligned* start). With
no upper limit on ``s`` every such start counts; beyond the signal's end every window
integrates the last value, which the start at the end itself already gives.

Write ``runtime = q * step + f`` (``0 <= f < step``, ``theta = f / step``) and let
``X[k]`` be the integral over the ``q`` whole periods from boundary ``k`` and ``Y[k]``
the one over ``q + 1``. The aligned start at ``k`` integrates ``(1 - theta) X[k] + theta
Y[k]`` and the end-aligned start ending at boundary ``k + q`` integrates ``(1 - theta)
X[k] + theta Y[k - 1]``: both are at least ``X[k]`` and at least ``theta`` times their
``Y`` (intensity is not negative). So for each distinct ``q`` a run needs only the
boundaries whose ``X`` (or ``Y``) is small enough to beat the best it already has, found
in ``X`` (``Y``) sorted once: the minimum is exact, and a run checks a handful of starts
instead of every period of the year. A job's configurations are many runs of which one
counts; ``least_per_group`` first drops those that cheap bounds show cannot be it.
"""

from __future__ import annotations

import math

import numpy as np

from slurm_green.carbon.signal import CarbonSignal

#: Candidate starts expanded at once (memory: a few arrays of this many floats).
_CHUNK = 1 << 22


class _Grid:
    """The signal's periods padded with its first and last values, so every window of interest lies on it."""

    def __init__(self, signal: CarbonSignal, earliest: float, longest: float) -> None:
        self.step = float(signal.step)
        left = max(1, math.ceil((signal.start - earliest) / self.step) + 1)
        right = math.ceil(longest / self.step) + 2
        values = np.asarray(signal.values, dtype=np.float64)
        self.values = np.concatenate((np.full(left, values[0]), values, np.full(right, values[-1])))
        self.origin = signal.start - left * self.step
        #: Integral from the origin to each boundary (g s / kWh).
        self.prefix = np.concatenate(([0.0], np.cumsum(self.values * self.step)))
        #: Index of the boundary at the signal's end: no later start can do better.
        self.end = left + len(values)

    def integral_to(self, t: np.ndarray) -> np.ndarray:
        i = np.clip(np.floor((t - self.origin) / self.step).astype(np.int64), 0, len(self.values) - 1)
        return self.prefix[i] + self.values[i] * (t - self.origin - i * self.step)

    def first_boundary(self, t: np.ndarray) -> np.ndarray:
        """Index of the first boundary at or after ``t`` (at most the end's)."""
        return np.minimum(np.ceil((t - self.origin) / self.step - 1e-9).astype(np.int64), self.end)


def least_integrals(signal: CarbonSignal, earliest: np.ndarray, runtime: np.ndarray) -> np.ndarray:
    """Per run, the least integral of intensity (g s / kWh) over ``[s, s + runtime]`` for any ``s >= earliest``.

    Multiply by power (W) and divide by 3.6e9 for kg. Exact up to floating point.
    """
    n = len(earliest)
    return least_per_group(signal, earliest, runtime, np.ones(n), np.arange(n), n)


def least_per_group(signal: CarbonSignal, earliest: np.ndarray, runtime: np.ndarray, weight: np.ndarray,
                    group: np.ndarray, groups: int) -> np.ndarray:
    """Per group (a job), the least ``weight x least integral`` over its runs (its configurations): exact.

    Most of a job's configurations cannot be its best, so each run first gets a cheap lower
    and upper bound (the least X and Y at or after its earliest start; the starts where they
    are and at once): a run whose lower bound is not below its group's best upper bound is
    done, and only the others are scanned, and only for starts that can beat that bound.
    """
    earliest = np.asarray(earliest, dtype=np.float64)
    runtime = np.asarray(runtime, dtype=np.float64)
    if len(earliest) == 0:
        return np.full(groups, np.inf)
    grid = _Grid(signal, float(earliest.min()), float(runtime.max()))
    q_all = np.floor(runtime / grid.step).astype(np.int64)
    theta = runtime / grid.step - q_all
    low = grid.integral_to(earliest + runtime) - grid.integral_to(earliest)  # starting at once
    high = low.copy()
    k0 = grid.first_boundary(earliest)
    j0 = np.maximum(grid.first_boundary(earliest + theta * grid.step), 1)
    for q, items in _by_q(q_all):
        x, y = _windows(grid, q)
        kx, ky = k0[items], j0[items]
        th = theta[items]
        at, at_y = _suffix_argmin(x), _suffix_argmin(y)
        # The starts where X and Y are least: aligned there, and end-aligned with the least X or Y.
        ends_y = np.minimum(at_y[ky - 1] + 1, len(x) - 1)
        high[items] = np.minimum.reduce([high[items], (1 - th) * x[at[kx]] + th * y[at[kx]],
                                         (1 - th) * x[at_y[kx]] + th * y[at_y[kx]],
                                         (1 - th) * x[at[ky]] + th * y[at[ky] - 1],
                                         (1 - th) * x[ends_y] + th * y[ends_y - 1]])
        low[items] = np.minimum(low[items], (1 - th) * x[at[kx]] + th * y[at_y[kx - 1]])
    best = np.full(groups, np.inf)
    np.minimum.at(best, group, weight * high)
    # What a run must beat to matter: its own upper bound and its group's best over its weight.
    target = np.minimum(high, best[group] / weight)
    open_ = np.flatnonzero(weight * low < best[group])
    for q, sub in _by_q(q_all[open_]):
        items = open_[sub]
        x, y = _windows(grid, q)
        found = _scan(x, y, target[items], k0[items], j0[items], theta[items])
        np.minimum.at(best, group[items], weight[items] * found)
    return best


def _by_q(q: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Indices of ``q`` grouped by value."""
    order = np.argsort(q, kind="stable")
    return [(int(q[part[0]]), part) for part in np.split(order, np.flatnonzero(np.diff(q[order])) + 1) if len(part)]


def _windows(grid: _Grid, q: int) -> tuple[np.ndarray, np.ndarray]:
    """X and Y: the integrals over q and q + 1 whole periods from each boundary up to the end's."""
    base = grid.prefix[: grid.end + 1]
    return grid.prefix[q: q + grid.end + 1] - base, grid.prefix[q + 1: q + grid.end + 2] - base


def _suffix_argmin(x: np.ndarray) -> np.ndarray:
    """For each index, the index of the least ``x`` at or after it (the latest among ties)."""
    n = len(x)
    rev = x[::-1]
    running = np.minimum.accumulate(rev)
    # Index (in rev) where each running minimum was last set.
    set_at = np.maximum.accumulate(np.where(rev == running, np.arange(n), 0))
    return (n - 1 - set_at)[::-1]


def _scan(x: np.ndarray, y: np.ndarray, target: np.ndarray, k0: np.ndarray, j0: np.ndarray,
          theta: np.ndarray) -> np.ndarray:
    """Each run's least integral below ``target`` (else ``target``), over the starts that can get there.

    A start's integral is at least X (aligned at k, or end-aligned ending at k + q) and at
    least theta Y (aligned at k, or end-aligned at k + 1): each run looks at the boundaries
    of whichever of the two sorted lists admits fewer.
    """
    by_x, by_y = np.argsort(x, kind="stable"), np.argsort(y, kind="stable")
    count_x = np.searchsorted(x[by_x], target, side="left")
    count_y = np.searchsorted(y[by_y], target / np.maximum(theta, 1e-300), side="left")
    use_y = count_y < count_x
    out = target.copy()
    for which, order, count, shift in ((~use_y, by_x, count_x, 0), (use_y, by_y, count_y, 1)):
        runs = np.flatnonzero(which)
        out[runs] = _scan_list(order, count[runs], k0[runs], j0[runs], theta[runs], x, y, out[runs], shift)
    return out


def _scan_list(order: np.ndarray, count: np.ndarray, k0: np.ndarray, j0: np.ndarray, theta: np.ndarray,
               x: np.ndarray, y: np.ndarray, best: np.ndarray, shift: int) -> np.ndarray:
    """The least integral over boundaries ``order[:count]``: aligned there, end-aligned there + ``shift``."""
    out = best.copy()
    last = len(x) - 1
    lo = 0
    while lo < len(count):
        hi = lo + max(1, int(np.searchsorted(np.cumsum(count[lo:]), _CHUNK, side="right")))
        c = count[lo:hi]
        run = np.repeat(np.arange(lo, hi), c)
        k = order[np.arange(len(run)) - np.repeat(np.cumsum(c) - c, c)]
        th = theta[run]
        aligned = np.where(k >= k0[run], (1 - th) * x[k] + th * y[k], np.inf)
        e = np.minimum(k + shift, last)
        ended = np.where((e >= j0[run]) & (k + shift <= last), (1 - th) * x[e] + th * y[e - 1], np.inf)
        np.minimum.at(out, run, np.minimum(aligned, ended))
        lo = hi
    return out
