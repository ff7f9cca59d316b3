"""A fast numeric view of a carbon forecast for the policy layer.

:class:`CarbonSignal` turns a regular Series into numpy arrays of period
start epochs and values, plus a cumulative integral, so that a policy can ask
"what is the intensity at t", "what is the mean over [t0, t1]" and "when should
a job of this length start" in microseconds, without pandas.

The signal is piecewise constant: each value holds from its period start to the
next one. Beyond the last period the last value holds forever, and before the
first period the first value holds; a forecast horizon therefore never makes a
query fail, and callers who care check :attr:`CarbonSignal.end`.
Times are float seconds since the Unix epoch (UTC); values are gCO2eq/kWh.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from slurm_green.carbon.timebase import epoch_seconds

#: Relative tolerance under which two candidate means count as equal, so ties go to the earliest start.
_TIE_TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class CarbonSignal:
    """Piecewise-constant carbon intensity; see the module docstring for semantics."""

    starts: np.ndarray  #: period starts, epoch seconds, strictly increasing
    values: np.ndarray  #: gCO2eq/kWh of each period
    step: float  #: period length in seconds
    _cumulative: np.ndarray  #: integral of intensity from starts[0] to starts[i], g*s/kWh

    @classmethod
    def from_series(cls, series: pd.Series) -> CarbonSignal:
        """Build from a validated regular series on a tz-aware DatetimeIndex (no NaN)."""
        if series.empty:
            raise ValueError("cannot build a CarbonSignal from an empty series")
        if series.index.tz is None:
            raise ValueError("series index must be tz-aware")
        values = series.to_numpy(dtype=np.float64)
        if not np.isfinite(values).all():
            raise ValueError("series has missing values; validate it first")
        starts = epoch_seconds(series.index)
        if len(starts) > 1:
            steps = np.diff(starts)
            if not np.allclose(steps, steps[0]) or steps[0] <= 0:
                raise ValueError("series must be regular and increasing")
            step = float(steps[0])
        else:
            step = float(pd.Timedelta(series.index.freq or "1h").total_seconds())
        cumulative = np.concatenate(([0.0], np.cumsum(values * step)))[:-1]
        return cls(starts, values, step, cumulative)

    @property
    def start(self) -> float:
        """Start of the first period (epoch seconds)."""
        return float(self.starts[0])

    @property
    def end(self) -> float:
        """End of the last period; later times use the last value."""
        return float(self.starts[-1] + self.step)

    def value_at(self, t_epoch: float | np.ndarray) -> float | np.ndarray:
        """Intensity at time(s) ``t_epoch``."""
        out = self.values[self._period(t_epoch)]
        return float(out) if np.ndim(out) == 0 else out

    def mean_over(self, t0: float | np.ndarray, t1: float | np.ndarray) -> float | np.ndarray:
        """Time-weighted mean intensity over ``[t0, t1]`` (the value at t0 when t1 == t0)."""
        t0a, t1a = np.asarray(t0, dtype=np.float64), np.asarray(t1, dtype=np.float64)
        width = t1a - t0a
        if (width < 0).any():
            raise ValueError("mean_over needs t1 >= t0")
        positive = width > 0
        if positive.all():  # the usual case: no zero-length window, no value lookup needed
            out = (self._integral(t1a) - self._integral(t0a)) / width
        else:
            safe = np.where(positive, width, 1.0)
            out = np.where(positive, (self._integral(t1a) - self._integral(t0a)) / safe, self.value_at(t0a))
        return float(out) if out.ndim == 0 else out

    def window_means(self, starts: np.ndarray, durations: np.ndarray) -> np.ndarray:
        """``mean_over(starts[None, :], starts[None, :] + durations[:, None])``, shape [durations, starts].

        A policy scoring every job (duration) at every candidate start asks this each
        tick; the integral and value at each start are computed once per start instead
        of once per (job, start), with the same arithmetic, so the means are the same.
        """
        t0 = np.asarray(starts, dtype=np.float64)
        t1 = t0[None, :] + np.asarray(durations, dtype=np.float64)[:, None]
        width = t1 - t0
        if (width < 0).any():
            raise ValueError("window_means needs durations >= 0")
        positive = width > 0
        if positive.all():  # the usual case: no zero-length window, no value lookup needed
            return (self._integral(t1) - self._integral(t0)) / width
        safe = np.where(positive, width, 1.0)
        return np.where(positive, (self._integral(t1) - self._integral(t0)) / safe, self.value_at(t0))

    def best_start(self, earliest: float, latest: float, duration: float) -> float:
        """The start in ``[earliest, latest]`` minimising the mean over ``[start, start + duration]``.

        Ties go to the earliest start (sooner is better for the user).
        """
        starts, means = self.start_candidates(earliest, latest, duration)
        return float(starts[earliest_best(means)])

    def start_candidates(self, earliest: float, latest: float, duration: float) -> tuple[np.ndarray, np.ndarray]:
        """Every start in ``[earliest, latest]`` where the mean over ``[start, start + duration]`` can
        be lowest, in time order (the first is ``earliest``), with that mean.

        The mean is piecewise linear in the start time, with kinks only where the
        start or the end crosses a period boundary, so the minimum is at one of
        those kinks or at an end of the interval: all are evaluated at once. A policy
        that must skip some starts (capacity) picks the best of the rest with
        :func:`earliest_best`.
        """
        if latest < earliest:
            raise ValueError("best_start needs latest >= earliest")
        if duration < 0:
            raise ValueError("best_start needs duration >= 0")
        boundaries = np.concatenate((self.starts, [self.end]))
        candidates = np.concatenate(([earliest, latest], boundaries, boundaries - duration))
        candidates = np.unique(candidates[(candidates >= earliest) & (candidates <= latest)])
        if duration == 0:
            means = np.asarray(self.value_at(candidates), dtype=np.float64)
        else:
            means = (self._integral(candidates + duration) - self._integral(candidates)) / duration
        return candidates, means

    def _integral(self, t: np.ndarray) -> np.ndarray:
        """Integral of intensity from ``starts[0]`` to ``t`` (negative before the start)."""
        i = self._period(t)
        return self._cumulative[i] + self.values[i] * (t - self.starts[i])

    def _period(self, t: float | np.ndarray) -> np.ndarray:
        """Index of the period holding ``t``: the first before the start, the last after the end.

        ``searchsorted(side="right") - 1`` is never past the last period, so only its lower
        end is clamped (``np.clip`` costs more than the search on the policies' small arrays).
        """
        return np.maximum(np.searchsorted(self.starts, t, side="right") - 1, 0)


def earliest_best(means: np.ndarray) -> int:
    """The index of the lowest of ``means`` (in time order); means within a relative
    ``_TIE_TOLERANCE`` of it count as equal and the earliest wins."""
    best = means.min()
    return int(np.flatnonzero(means <= best + _TIE_TOLERANCE * max(abs(best), 1.0))[0])


def below(means: np.ndarray, reference: float) -> np.ndarray:
    """Which of ``means`` are lower than ``reference`` by more than the tie tolerance (a real gain)."""
    return means < reference - _TIE_TOLERANCE * max(abs(reference), 1.0)
