"""Validation and repair: properties over random series, and each named failure."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_green.carbon.errors import (
    DuplicateTimestampError,
    GapError,
    StaleDataError,
    TimezoneError,
    UnitError,
    ValueRangeError,
)
from slurm_green.carbon.validate import check_value, validate_series

T0 = pd.Timestamp("2023-05-01", tz="UTC")
MAX_GAP = pd.Timedelta(hours=3)
HOUR = pd.Timedelta(hours=1)


@st.composite
def damaged_series(draw):
    """A plausible hourly series with dropped points, NaNs, exact duplicates and small negatives."""
    n = draw(st.integers(2, 80))
    values = draw(st.lists(st.floats(0, 900, allow_nan=False), min_size=n, max_size=n))
    index = pd.date_range(T0, periods=n, freq="h")
    series = pd.Series(values, index=index)
    keep = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    keep[0] = keep[-1] = True
    series = series[keep]
    nan_at = draw(st.lists(st.integers(1, max(1, len(series) - 2)), max_size=5))
    series.iloc[[i for i in nan_at if 0 < i < len(series) - 1]] = np.nan
    dup_at = draw(st.lists(st.integers(0, len(series) - 1), max_size=4))
    series = pd.concat([series, series.iloc[dup_at]]).sample(frac=1.0, random_state=draw(st.integers(0, 99)))
    return series, index


def long_gap_mask(raw: pd.Series, index: pd.DatetimeIndex) -> pd.Series:
    """Oracle: True where a point lies in a run of missing points spanning more than MAX_GAP."""
    known = raw.dropna().groupby(level=0).first().reindex(index).notna()
    mask = pd.Series(False, index=index)
    run = []
    for t, ok in known.items():
        if ok:
            if run and (len(run) + 1) * pd.Timedelta(hours=1) > MAX_GAP:
                mask[run] = True
            run = []
        else:
            run.append(t)
    return mask


def long_gap_starts(raw: pd.Series, index: pd.DatetimeIndex) -> list[pd.Timestamp]:
    """Oracle: the first missing timestamp of each run of missing points spanning more than MAX_GAP."""
    mask = long_gap_mask(raw, index)
    return [t for t, prev in zip(index, [False, *mask.iloc[:-1]], strict=True) if mask[t] and not prev]


@settings(max_examples=150, deadline=None)
@given(damaged_series())
def test_repaired_series_is_regular_utc_nonnegative_with_only_short_gaps_filled(case):
    raw, index = case
    starts = long_gap_starts(raw, pd.date_range(index[0], index[-1], freq="h"))
    if starts:  # a long gap is an error naming how many and where, never a guess
        with pytest.raises(GapError) as info:
            validate_series(raw, resolution=HOUR, max_gap=MAX_GAP)
        assert f"{len(starts)} gap(s) longer than" in str(info.value)
        assert str(starts[0]) in str(info.value)
        return
    out = validate_series(raw, resolution=HOUR, max_gap=MAX_GAP)
    assert str(out.index.tz) == "UTC"
    assert out.index.is_monotonic_increasing and out.index.is_unique
    assert (out.index[1:] - out.index[:-1] == pd.Timedelta(hours=1)).all()
    assert out.notna().all() and (out >= 0).all()
    original = raw.dropna().groupby(level=0).first()
    common = original.index.intersection(out.index)
    np.testing.assert_allclose(out[common], original[common])  # known values untouched


def test_a_six_hour_gap_is_reported_with_where_it_is_and_short_gaps_are_counted(caplog):
    index = pd.date_range(T0, periods=48, freq="h")
    raw = pd.Series(300.0, index=index).drop(index[10:16]).drop(index[30:32])  # 6 h missing, then 2 h
    with pytest.raises(GapError) as info:
        validate_series(raw, resolution=HOUR, label="de.csv")
    assert str(info.value) == (
        "de.csv: 1 gap(s) longer than 0 days 03:00:00 (the most that is interpolated): 6 point(s) missing "
        "from 2023-05-01 10:00:00+00:00 (0 days 07:00:00 between known values)"
    )
    with caplog.at_level(logging.WARNING):
        out = validate_series(raw, resolution=HOUR, max_gap=pd.Timedelta(hours=7), label="de.csv")
    assert out.notna().all() and len(out) == 48
    assert "de.csv: 8 missing point(s) in 2 short gap(s) interpolated" in caplog.text


def test_many_long_gaps_are_counted_and_the_first_five_named():
    index = pd.date_range(T0, periods=200, freq="h")
    raw = pd.Series(300.0, index=index).drop([t for i, t in enumerate(index) if i % 20 in (5, 6, 7, 8)])
    with pytest.raises(GapError, match=r"10 gap\(s\) longer than .*; and 5 more$") as info:
        validate_series(raw, resolution=HOUR)
    assert str(info.value).count("point(s) missing from") == 5


def test_a_series_without_gaps_logs_no_repair(caplog):
    with caplog.at_level(logging.WARNING):
        validate_series(pd.Series(300.0, index=pd.date_range(T0, periods=5, freq="h")))
    assert "interpolated" not in caplog.text


def test_naive_stamps_need_a_stated_timezone():
    raw = pd.Series([100.0, 110.0], index=pd.date_range("2023-01-01", periods=2, freq="h"))
    with pytest.raises(TimezoneError, match="no timezone"):
        validate_series(raw)


def test_naive_local_stamps_across_dst_are_converted(caplog):
    # Berlin local time across the October 2023 fall-back: 02:00 occurs twice.
    local = ["2023-10-29 00:00", "2023-10-29 01:00", "2023-10-29 02:00", "2023-10-29 02:00", "2023-10-29 03:00"]
    raw = pd.Series([10.0, 20.0, 30.0, 40.0, 50.0], index=pd.to_datetime(local))
    with caplog.at_level(logging.WARNING):
        out = validate_series(raw, tz="Europe/Berlin")
    assert list(out.index) == list(pd.date_range("2023-10-28 22:00", periods=5, freq="h", tz="UTC"))
    assert list(out) == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert "localised as Europe/Berlin" in caplog.text


def test_naive_local_stamps_across_dst_newest_first_keep_their_hours():
    """Exports often list the newest reading first: the repeated 02:00 is read backwards."""
    local = ["2023-10-29 00:00", "2023-10-29 01:00", "2023-10-29 02:00", "2023-10-29 02:00", "2023-10-29 03:00"]
    raw = pd.Series([10.0, 20.0, 30.0, 40.0, 50.0], index=pd.to_datetime(local)).iloc[::-1]
    out = validate_series(raw, tz="Europe/Berlin")
    assert list(out.index) == list(pd.date_range("2023-10-28 22:00", periods=5, freq="h", tz="UTC"))
    assert list(out) == [10.0, 20.0, 30.0, 40.0, 50.0]


def test_naive_local_stamps_across_dst_in_no_order_are_refused():
    local = ["2023-10-29 02:00", "2023-10-29 00:00", "2023-10-29 02:00", "2023-10-29 01:00", "2023-10-29 03:00"]
    raw = pd.Series([30.0, 10.0, 40.0, 20.0, 50.0], index=pd.to_datetime(local))
    with pytest.raises(TimezoneError, match="out of time order, so which is which cannot be told"):
        validate_series(raw, tz="Europe/Berlin")


def test_nonexistent_local_time_is_a_timezone_error():
    raw = pd.Series([1.0, 2.0, 3.0], index=pd.to_datetime(["2023-03-26 01:00", "2023-03-26 02:00", "2023-03-26 03:00"]))
    with pytest.raises(TimezoneError):
        validate_series(raw, tz="Europe/Berlin")


def test_local_time_mislabelled_as_utc_shows_as_conflicting_duplicates():
    stamps = pd.to_datetime(["2023-10-29 00:00", "2023-10-29 01:00", "2023-10-29 01:00", "2023-10-29 02:00"], utc=True)
    with pytest.raises(DuplicateTimestampError, match="2023-10-29 01:00"):
        validate_series(pd.Series([100.0, 200.0, 400.0, 300.0], index=stamps))


def test_exact_duplicates_collapse_with_a_warning(caplog):
    stamps = pd.to_datetime(["2023-01-01 00:00", "2023-01-01 01:00", "2023-01-01 01:00"], utc=True)
    with caplog.at_level(logging.WARNING):
        out = validate_series(pd.Series([100.0, 200.0, 200.0], index=stamps))
    assert list(out) == [100.0, 200.0]
    assert "duplicate" in caplog.text


def test_off_grid_stamps_are_rejected():
    stamps = pd.to_datetime(["2023-01-01 00:00", "2023-01-01 01:00", "2023-01-01 02:30", "2023-01-01 03:00"], utc=True)
    with pytest.raises(TimezoneError, match="off the"):
        validate_series(pd.Series([1.0, 2.0, 3.0, 4.0], index=stamps), resolution=pd.Timedelta(hours=1))


def hourly(values) -> pd.Series:
    return pd.Series(np.asarray(values, dtype=float), index=pd.date_range(T0, periods=len(values), freq="h"))


def test_lbs_per_mwh_magnitudes_are_a_unit_error():
    with pytest.raises(UnitError, match="lbs/MWh"):
        validate_series(hourly(np.linspace(1700, 2100, 48)))


def test_kg_per_kwh_magnitudes_are_a_unit_error_unless_waived():
    kg = hourly(np.linspace(0.2, 0.45, 48))
    with pytest.raises(UnitError, match="kg/kWh"):
        validate_series(kg)
    assert validate_series(kg, check_units=False).iloc[0] == pytest.approx(0.2)


def test_a_clean_grid_in_grams_is_not_mistaken_for_kg():
    norway_like = hourly(np.linspace(1, 48, 48))
    assert validate_series(norway_like).iloc[-1] == 48


def test_isolated_spike_is_dropped_and_interpolated(caplog):
    values = [200.0] * 60
    values[30] = 99999.0
    with caplog.at_level(logging.WARNING):
        out = validate_series(hourly(values))
    assert out.iloc[30] == 200.0
    assert "out-of-range" in caplog.text


def test_many_negative_values_are_an_error_and_tiny_ones_are_clipped():
    with pytest.raises(ValueRangeError, match="negative"):
        validate_series(hourly([-50.0] * 10 + [100.0] * 10))
    assert validate_series(hourly([-0.4] + [100.0] * 60)).iloc[0] == 0.0


def test_stale_data_is_rejected():
    series = hourly([100.0] * 5)
    with pytest.raises(StaleDataError):
        validate_series(series, now=T0 + pd.Timedelta(hours=10), max_age=pd.Timedelta(hours=2))
    validate_series(series, now=T0 + pd.Timedelta(hours=5), max_age=pd.Timedelta(hours=2))


def test_check_value_rejects_missing_negative_and_absurd_readings():
    assert check_value(120.5, label="x") == 120.5
    for bad in (float("nan"), -20.0, 5000.0):
        with pytest.raises(ValueRangeError):
            check_value(bad, label="x")
