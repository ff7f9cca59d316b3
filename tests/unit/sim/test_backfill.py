"""The backfill pass's reservation book: which nodes some reservation holds during a run from
each of many starts, kept sorted as reservations are added, against a plain scan of them all;
the times a reservation may start at, merged in as they are added; the first time a job fits."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_green.sim.backfill import BACKFILL_RESOLUTION_S, BACKFILL_WINDOW_S, FreeProfile, Held, first_fit

NODES = 5
minutes = st.integers(min_value=0, max_value=600).map(lambda m: m * 60.0)
reservation = st.tuples(minutes, st.integers(min_value=0, max_value=300).map(lambda m: m * 60.0),
                        st.lists(st.integers(min_value=0, max_value=NODES - 1), min_size=1, max_size=NODES, unique=True))


@settings(max_examples=300, deadline=None)
@given(st.lists(reservation, min_size=1, max_size=25), st.lists(minutes, min_size=1, max_size=12),
       st.integers(min_value=0, max_value=400).map(lambda m: m * 60.0 + 17.0))
def test_free_over_and_free_during_are_the_scan_of_every_reservation(reservations, starts, length):
    held = Held(NODES)
    for begin, duration, nodes in reservations:
        held.add(begin, begin + duration, nodes)
    times = np.array(sorted(starts))
    expected = np.zeros((len(times), NODES), dtype=bool)
    for (begin, duration, nodes) in reservations:
        lo = np.floor(begin / BACKFILL_RESOLUTION_S) * BACKFILL_RESOLUTION_S
        hi = np.floor((begin + duration) / BACKFILL_RESOLUTION_S) * BACKFILL_RESOLUTION_S
        overlaps = (lo - length <= times) & (times < hi)  # a run from t meets [lo, hi)
        expected[np.ix_(overlaps, nodes)] = True
    assert (held.free_over(times, length) == ~expected).all()
    for t, row in zip(times.tolist(), expected):
        assert (held.free_during(t, t + length) == ~row).all()


@settings(max_examples=200, deadline=None)
@given(st.lists(minutes, max_size=8), st.lists(reservation, min_size=1, max_size=12),
       st.integers(min_value=0, max_value=11))
def test_candidates_merged_one_reservation_at_a_time_are_those_of_all_at_once(limit_ends, reservations, first):
    """What ``Simulator._reserve`` searches: the profile's times and the reservations' ends after now, in
    the window, each with its profile row; merged in as reservations are added."""
    now = 120.0
    ends = [max(t, now) for t in limit_ends]  # as ``Simulator._free_profile`` gives them: past ones leave now
    profile = FreeProfile(now, np.array(ends).reshape(1, -1))  # one node, busy GPUs
    held = Held(NODES)
    for i, (begin, duration, nodes) in enumerate(reservations):
        if i == first:
            profile.candidates(held)  # built here, the rest merged in
        held.add(begin, begin + duration, nodes)
    times, rows = profile.candidates(held)
    every = np.union1d(profile.times, held.end[:held.count][held.end[:held.count] > now])
    assert times.tolist() == every[every <= now + BACKFILL_WINDOW_S].tolist()
    assert rows.tolist() == [int(np.flatnonzero(profile.times <= t)[-1]) for t in times]


@given(st.lists(st.lists(st.booleans(), min_size=NODES, max_size=NODES), min_size=1, max_size=8),
       st.lists(st.integers(min_value=0, max_value=NODES - 1), max_size=3, unique=True),
       st.integers(min_value=1, max_value=NODES))
def test_first_fit_is_the_first_row_with_the_pinned_nodes_or_enough_of_them(rows, pinned, count):
    ok = np.array(rows)
    expected = next((r for r, row in enumerate(rows)
                     if (all(row[i] for i in pinned) if pinned else sum(row) >= count)), None)
    assert first_fit(ok, pinned, count) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.one_of(st.just(0.0), minutes), min_size=4, max_size=4), min_size=1, max_size=NODES),
       st.integers(min_value=1, max_value=4), st.lists(st.booleans(), min_size=NODES, max_size=NODES))
def test_room_is_from_the_first_row_with_that_many_free_gpus(gpu_ends, per_node, allowed_nodes):
    """A node has room for ``per_node`` GPUs from its ``ready`` row on: where the GPUs free by
    then (free now, or their job's limit passed) are that many; never on a node not allowed."""
    now = 0.0
    ends = np.array(gpu_ends)
    allowed = np.array(allowed_nodes[:len(ends)])
    profile = FreeProfile(now, ends)
    ready, room = profile.room(per_node, "t", allowed)
    for row, t in enumerate(profile.times):
        has_room = ((ends <= t).sum(axis=1) >= per_node) & allowed
        assert ((ready <= row) == has_room).all() and (room[row] == has_room).all()
