"""The backfill pass's reservation book: which nodes some reservation holds during a run from
each of many starts, kept sorted as reservations are added, against a plain scan of them all."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_green.sim.engine import BACKFILL_RESOLUTION_S, _Held

NODES = 5
minutes = st.integers(min_value=0, max_value=600).map(lambda m: m * 60.0)
reservation = st.tuples(minutes, st.integers(min_value=0, max_value=300).map(lambda m: m * 60.0),
                        st.lists(st.integers(min_value=0, max_value=NODES - 1), min_size=1, max_size=NODES, unique=True))


@settings(max_examples=300, deadline=None)
@given(st.lists(reservation, min_size=1, max_size=25), st.lists(minutes, min_size=1, max_size=12),
       st.integers(min_value=0, max_value=400).map(lambda m: m * 60.0 + 17.0))
def test_held_over_is_the_scan_of_every_reservation(reservations, starts, length):
    held = _Held(NODES)
    for begin, duration, nodes in reservations:
        held.add(begin, begin + duration, nodes)
    times = np.array(sorted(starts))
    expected = np.zeros((len(times), NODES), dtype=bool)
    for (begin, duration, nodes) in reservations:
        lo = np.floor(begin / BACKFILL_RESOLUTION_S) * BACKFILL_RESOLUTION_S
        hi = np.floor((begin + duration) / BACKFILL_RESOLUTION_S) * BACKFILL_RESOLUTION_S
        overlaps = (lo - length <= times) & (times < hi)  # a run from t meets [lo, hi)
        expected[np.ix_(overlaps, nodes)] = True
    assert (held.held_over(times, length) == expected).all()
