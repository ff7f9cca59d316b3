"""CarbonSignal against brute-force oracles that do not share its cumulative-sum code."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_green.carbon.signal import CarbonSignal

T0 = pd.Timestamp("2024-03-01", tz="UTC")
E0 = T0.timestamp()
H = 3600.0


def make(values: list[float], step: str = "1h") -> CarbonSignal:
    index = pd.date_range(T0, periods=len(values), freq=step)
    return CarbonSignal.from_series(pd.Series(values, index=index, dtype="float64"))


def oracle_mean(values: list[float], t0: float, t1: float, step: float = H) -> float:
    """Mean of the piecewise-constant function by summing overlaps period by period."""
    total = 0.0
    n = len(values)
    edges = [E0 + i * step for i in range(n)] + [np.inf]
    edges[0] = -np.inf  # first value holds before the start
    for i, v in enumerate(values):
        lo, hi = max(t0, edges[i]), min(t1, edges[i + 1])
        if hi > lo:
            total += v * (hi - lo)
    return total / (t1 - t0)


def test_value_at_inside_and_beyond_the_horizon():
    sig = make([100, 200, 50])
    assert sig.value_at(E0) == 100
    assert sig.value_at(E0 + H - 1) == 100
    assert sig.value_at(E0 + H) == 200
    assert sig.value_at(E0 + 2.5 * H) == 50
    assert sig.value_at(E0 + 1000 * H) == 50  # last value extends
    assert sig.value_at(E0 - 10 * H) == 100  # first value extends backwards
    assert sig.end == E0 + 3 * H
    np.testing.assert_array_equal(sig.value_at(np.array([E0, E0 + H])), [100, 200])


def test_mean_over_simple_cases():
    sig = make([100, 200, 50])
    assert sig.mean_over(E0, E0 + 2 * H) == pytest.approx(150)
    assert sig.mean_over(E0 + 0.5 * H, E0 + 1.5 * H) == pytest.approx(150)
    assert sig.mean_over(E0 + 2 * H, E0 + 6 * H) == pytest.approx(50)  # beyond horizon: last value
    assert sig.mean_over(E0 + H, E0 + H) == 200
    with pytest.raises(ValueError):
        sig.mean_over(E0 + H, E0)


values_st = st.lists(st.floats(0, 1000, allow_nan=False), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(values=values_st, a=st.floats(-5, 50), width=st.floats(0.01, 30))
def test_mean_over_matches_overlap_oracle(values, a, width):
    t0, t1 = E0 + a * H, E0 + (a + width) * H
    assert make(values).mean_over(t0, t1) == pytest.approx(oracle_mean(values, t0, t1), rel=1e-9, abs=1e-6)


@settings(max_examples=150, deadline=None)
@given(values=values_st, earliest=st.floats(-2, 30), span=st.floats(0, 20), duration=st.floats(0.1, 12))
def test_best_start_is_optimal_against_a_dense_scan(values, earliest, span, duration):
    sig = make(values)
    lo, hi, d = E0 + earliest * H, E0 + (earliest + span) * H, duration * H
    best = sig.best_start(lo, hi, d)
    assert lo <= best <= hi
    scan = np.linspace(lo, hi, 400)
    scan_min = min(oracle_mean(values, s, s + d) for s in scan)
    assert oracle_mean(values, best, best + d) <= scan_min + 1e-6 * max(1.0, scan_min)


@settings(max_examples=100, deadline=None)
@given(values=values_st, starts=st.lists(st.floats(-5, 50), min_size=1, max_size=6),
       durations=st.lists(st.floats(0, 30), min_size=1, max_size=6))
def test_window_means_is_mean_over_on_the_grid_exactly(values, starts, durations):
    sig = make(values)
    t0 = E0 + np.array(starts) * H
    d = np.array(durations) * H
    grid = np.broadcast_to(t0, (len(d), len(t0)))
    np.testing.assert_array_equal(sig.window_means(t0, d), sig.mean_over(grid, t0[None, :] + d[:, None]))


def test_window_means_rejects_negative_durations():
    with pytest.raises(ValueError):
        make([100, 200]).window_means(np.array([E0]), np.array([-1.0]))


def test_best_start_finds_the_dip_and_prefers_earliest_on_ties():
    sig = make([300, 300, 100, 100, 300, 300])
    assert sig.best_start(E0, E0 + 5 * H, 2 * H) == E0 + 2 * H
    flat = make([200] * 6)
    assert flat.best_start(E0 + 0.5 * H, E0 + 4 * H, H) == E0 + 0.5 * H
    # A job longer than the dip: best placement still covers the whole dip.
    assert sig.best_start(E0, E0 + 3 * H, 3 * H) in (E0 + H, E0 + 2 * H)


def test_from_series_rejects_bad_input():
    index = pd.date_range(T0, periods=3, freq="h")
    with pytest.raises(ValueError):
        CarbonSignal.from_series(pd.Series([1.0, np.nan, 2.0], index=index))
    with pytest.raises(ValueError):
        CarbonSignal.from_series(pd.Series([1.0, 2.0, 3.0], index=index.tz_localize(None)))
    with pytest.raises(ValueError):
        CarbonSignal.from_series(pd.Series([1.0, 2.0, 3.0], index=index[[0, 1]].append(index[[0]] + pd.Timedelta("5h"))))
