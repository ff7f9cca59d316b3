"""The synthetic source is deterministic, labelled, and has a clear midday low-carbon window."""

from __future__ import annotations

import pandas as pd

from slurm_green.carbon.synthetic import SyntheticSource
from slurm_green.carbon.windows import low_carbon_windows


def test_synthetic_is_labelled_and_deterministic():
    source = SyntheticSource()
    at = pd.Timestamp("2025-02-04 03:00", tz="UTC")
    assert source.synthetic and source.name == "synthetic"
    pd.testing.assert_series_equal(source.forecast(pd.Timedelta(hours=48), now=at), source.forecast(pd.Timedelta(hours=48), now=at))


def test_synthetic_low_window_is_around_midday_utc():
    day = SyntheticSource().forecast(pd.Timedelta(hours=23), now=pd.Timestamp("2025-02-04 00:00", tz="UTC"))
    assert 11 <= day.idxmin().hour <= 14
    assert day.max() - day.min() > 150  # an obvious window, not noise
    (start, end), = low_carbon_windows(day)
    assert start.hour >= 9 and end.hour <= 16
