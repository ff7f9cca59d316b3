"""Backfill's data structures for one scheduling pass, as Slurm's ``sched/backfill`` keeps them:
the reservations made so far (``Held``), the free GPUs expected from now on (``FreeProfile``) and
the first time a job fits in them (``first_fit``). The engine (``sim.engine.Simulator``) decides
whom to reserve for and when a job starts; these only answer, in arrays, which nodes are free
when, the part of a simulation's time that has to be fast, and are tested against plain scans."""

from __future__ import annotations

import math

import numpy as np

#: Slurm's bf_max_job_test default: queued jobs the backfill pass looks at.
BACKFILL_DEPTH = 500
#: Slurm's bf_window default: a blocked job that cannot start within it reserves nothing.
BACKFILL_WINDOW_S = 86400.0
#: Slurm's bf_resolution default: a reservation's start and end are rounded down to it.
BACKFILL_RESOLUTION_S = 60.0


class Held:
    """One backfill pass's reservations, as Slurm's backfill keeps them (its node_space map):
    **whole nodes** held for each blocked job from its expected start to that plus its time
    limit, times rounded down to ``BACKFILL_RESOLUTION_S``. Kept as arrays because every later
    job asks which nodes are free of them."""

    def __init__(self, nodes: int) -> None:
        self.end = np.empty(BACKFILL_DEPTH)  # in the order made
        self.count = 0
        self._nodes = nodes
        # The reservations by start and by end, each with per-node running counts (row i: the
        # first i of that order), kept sorted as reservations are added: ``free_over`` asks them
        # for every blocked job, and re-sorting each time was most of a simulation's time.
        self._by_start = _RunningCounts(nodes)
        self._by_end = _RunningCounts(nodes)

    def add(self, start: float, end: float, nodes: list[int]) -> None:
        held = np.zeros(self._nodes, dtype=np.int16)  # 1: held (counted per node)
        held[nodes] = 1
        end = math.floor(end / BACKFILL_RESOLUTION_S) * BACKFILL_RESOLUTION_S
        self._by_start.insert(math.floor(start / BACKFILL_RESOLUTION_S) * BACKFILL_RESOLUTION_S, held)
        self._by_end.insert(end, held)
        self.end[self.count] = end
        self.count += 1

    def free_during(self, start: float, end: float) -> np.ndarray | None:
        """Nodes no reservation holds at any time in [start, end] (None: no reservation at
        all). Like Slurm, a job ending exactly when a reservation starts overlaps it."""
        if not self.count:
            return None
        # As in ``free_over``: those begun by ``end`` less those ended by ``start`` (start <= end).
        return self._by_start.up_to(end) == self._by_end.up_to(start)

    def ends_after(self, t: float) -> np.ndarray:
        return self.end[:self.count][self.end[:self.count] > t]

    def free_over(self, times: np.ndarray, length: float) -> np.ndarray:
        """For each start in ``times`` (sorted), the nodes no reservation holds during a run
        of ``length`` from it: ``free_during`` for many starts at once (rows x nodes)."""
        # Reservation r overlaps a run from t when start_r - length <= t < end_r: on each node,
        # the reservations begun by t (in that sense) minus those ended by then. Those ended are
        # among those begun (end_r >= start_r, length >= 0), so "none held" is "the counts agree".
        return self._by_start.up_to(times + length) == self._by_end.up_to(times)


class _RunningCounts:
    """Reservations sorted by one key, with per-node counts of the first i of them."""

    def __init__(self, nodes: int) -> None:
        self.keys = np.empty(BACKFILL_DEPTH)
        # int16: at most BACKFILL_DEPTH reservations, and the rows ``up_to`` copies are half the size.
        self.counts = np.zeros((BACKFILL_DEPTH + 1, nodes), dtype=np.int16)
        self.size = 0

    def insert(self, key: float, held: np.ndarray) -> None:
        k, at = self.size, int(self.keys[:self.size].searchsorted(key, side="right"))
        self.keys[at + 1:k + 1] = self.keys[at:k].copy()
        self.keys[at] = key
        self.counts[at + 2:k + 2] = self.counts[at + 1:k + 1] + held
        self.counts[at + 1] = self.counts[at] + held
        self.size += 1

    def up_to(self, times: np.ndarray | float) -> np.ndarray:
        """Per time (rows; one time: a row) and node, how many reservations have a key at or before the time."""
        return self.counts[self.keys[:self.size].searchsorted(times, side="right")]


class FreeProfile:
    """Free GPUs per node from ``now`` on, as backfill expects them: running jobs leave at their
    time limits (those past it, now); one row (of ``times``) per moment something leaves. One
    profile serves the reservations made between two starts, so it also keeps what they all ask
    again: the candidate start times (``candidates``) and when nodes have room per GPU count (``room``)."""

    def __init__(self, now: float, ends: np.ndarray) -> None:
        """``ends``: per node (rows) and GPU, when backfill expects it free: ``now`` if it is, else
        its job's time limit's end (``now`` if past)."""
        self.now = now
        self.horizon = now + BACKFILL_WINDOW_S
        self.times = np.unique(np.concatenate(([now], ends.ravel())))
        # Per node, the row from which it has at least g free GPUs (g = 0, 1, ...): its GPUs' rows
        # in order. Free GPUs only grow with time, so this is the whole profile, without the
        # (rows x nodes) counts, whose cumulative sum was most of a profile's cost.
        self._ready = np.zeros((len(ends), ends.shape[1] + 1), dtype=np.int64)
        self._ready[:, 1:] = self.times.searchsorted(np.sort(ends, axis=1))
        self._room: dict[tuple[int, str | None], tuple[np.ndarray, np.ndarray]] = {}
        self._times: np.ndarray | None = None
        self._rows = np.empty(0, dtype=np.int64)
        self._seen = 0

    def _row(self, times: np.ndarray) -> np.ndarray:
        """Each of ``times``' row: the latest moment of the profile at or before it."""
        return self.times.searchsorted(times, side="right") - 1

    def candidates(self, held: Held) -> tuple[np.ndarray, np.ndarray]:
        """The moments a reservation may start, sorted: this profile's and the ends of ``held``'s
        reservations after now, up to the backfill window; and each one's row.
        Built once, then each reservation added since is merged in (one per blocked job)."""
        if self._times is None:
            times = np.union1d(self.times, held.ends_after(self.now))
            self._times = times[times <= self.horizon]
            self._rows = self._row(self._times)
            self._seen = held.count
        for end in held.end[self._seen:held.count].tolist():
            at = int(self._times.searchsorted(end))
            if self.now < end <= self.horizon and (at == len(self._times) or self._times[at] != end):
                self._times = np.concatenate((self._times[:at], [end], self._times[at:]))
                self._rows = np.concatenate((self._rows[:at], self._row(np.array([end])), self._rows[at:]))
        self._seen = held.count
        return self._times, self._rows

    def room(self, per_node: int, gpu_type: str | None, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Per node, the first row from which it has ``per_node`` free GPUs (past the last row on
        nodes not ``allowed``; ``gpu_type`` names that mask: None for none), and per row and node
        whether it has them then."""
        key = (per_node, gpu_type)
        room = self._room.get(key)
        if room is None:
            ready = self._ready[:, per_node].copy()
            if allowed is not None:
                ready[~allowed] = len(self.times)
            room = self._room[key] = ready, np.arange(len(self.times))[:, np.newaxis] >= ready
        return room


def first_fit(ok: np.ndarray, pinned: list[int], count: int) -> int | None:
    """The first row of ``ok`` (times x nodes with room) where a job fits: on all its ``pinned``
    nodes, else on ``count`` nodes; None if none."""
    if pinned:
        fit = ok[:, pinned].all(axis=1)
    elif count == 1:
        first = int(ok.argmax())  # a bool argmax stops at the first True: no per-row sums
        return first // ok.shape[1] if ok.flat[first] else None
    else:
        fit = ok.view(np.uint8).sum(axis=1) >= count
    return int(fit.argmax()) if fit.any() else None
