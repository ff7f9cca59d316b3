"""GPU-time committed per forecast period: what a capacity-aware start-time policy must not overfill.

A start-time policy that sends every job to the same clean window makes them queue past
it (the capacity-blind window baseline raises carbon on a loaded cluster). This profile
keeps, per period of the forecast's grid, the GPU-seconds already committed (running
jobs until their time limit, jobs already placed), so a job is only put where its GPU-time
still fits. It counts GPU-time per period, not GPUs at every instant: a job ending
half-way through a period leaves half that period's GPU-time to one starting there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Relative slack on the capacity check, so a job that exactly fills a period still fits.
_FIT_TOLERANCE = 1e-9


@dataclass
class GpuTimeProfile:
    """GPU-seconds committed in each period ``[origin + k step, origin + (k + 1) step)`` from ``now`` on.

    A period holds ``gpus x step`` GPU-seconds at most; the one holding ``now`` only what
    is left of it after ``now``. ``used`` grows as later periods are committed.
    """

    now: float
    origin: float  #: start of the period holding ``now``, on the forecast's grid
    step: float
    gpus: int
    used: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def on_grid(cls, now: float, grid_start: float, step: float, gpus: int) -> GpuTimeProfile:
        """An empty profile for ``gpus`` GPUs on the grid of periods of ``step`` from ``grid_start``."""
        return cls(now, grid_start + np.floor((now - grid_start) / step) * step, step, gpus)

    def _index(self, t: float) -> int:
        return int((t - self.origin) // self.step)

    def _overlap(self, starts: np.ndarray, duration: float) -> tuple[int, np.ndarray]:
        """The first period touched and each start's seconds in each period from it: ``[starts, periods]``."""
        first, last = self._index(float(starts.min())), self._index(float(starts.max()) + duration)
        begins = self.origin + self.step * np.arange(first, last + 1)
        if len(self.used) <= last:
            self.used = np.concatenate((self.used, np.zeros(last + 1 - len(self.used))))
        ends = starts[:, None] + duration
        return first, np.clip(np.minimum(ends, begins + self.step) - np.maximum(starts[:, None], begins), 0.0, None)

    def _lengths(self, first: int, periods: int) -> np.ndarray:
        """Seconds of each of ``periods`` periods from ``first`` that lie after ``now``."""
        begins = self.origin + self.step * np.arange(first, first + periods)
        return begins + self.step - np.maximum(begins, self.now)

    def fits(self, starts: np.ndarray, duration: float, gpus: int) -> np.ndarray:
        """Whether ``gpus`` GPUs from each of ``starts`` for ``duration`` s overfill no period."""
        first, seconds = self._overlap(np.asarray(starts, dtype=np.float64), duration)
        periods = seconds.shape[1]
        room = self.gpus * self._lengths(first, periods) - self.used[first:first + periods]
        return (gpus * seconds <= room + _FIT_TOLERANCE * self.gpus * self.step).all(axis=1)

    def earliest_room(self, duration: float, gpus: int) -> float:
        """The first start, now or a period's start, from which ``gpus`` GPUs have every period of
        ``duration`` s to themselves: where Slurm's queue would about start a job released now
        without room (each period it touches counted whole, so it errs late)."""
        need = max(1, int(np.ceil(duration / self.step)))
        free = (self.gpus - min(gpus, self.gpus)) * self._lengths(0, len(self.used))
        blocked = np.flatnonzero(self.used > free + _FIT_TOLERANCE * self.gpus * self.step)
        gap_starts = np.concatenate(([0], blocked + 1))
        gap_ends = np.concatenate((blocked, [np.iinfo(np.int64).max]))  # no period past ``used`` is blocked
        first = int(gap_starts[np.flatnonzero(gap_ends - gap_starts >= need)[0]])
        return float(max(self.now, self.origin + first * self.step))

    def commit(self, start: float, duration: float, gpus: int) -> None:
        """Hold ``gpus`` GPUs from ``start`` (not before ``now``) for ``duration`` s, fitting or not."""
        start = max(start, self.now)
        first, seconds = self._overlap(np.array([start]), max(0.0, duration))
        self.used[first:first + seconds.shape[1]] += gpus * seconds[0]

