"""Replay keeps hour-of-week alignment: a value replays at the same weekday and hour."""

from __future__ import annotations

import pandas as pd
import pytest

from slurm_green.carbon.errors import GapError
from slurm_green.carbon.files import FileSource, read_carbon_csv
from slurm_green.carbon.replay import replay_window


def test_replayed_values_come_from_the_same_hour_of_week(carbon_csvs):
    recorded = read_carbon_csv(carbon_csvs["DE-LU"])
    now = pd.Timestamp("2026-05-13 10:40", tz="UTC")  # a Wednesday
    window = replay_window(recorded, now, now + pd.Timedelta(hours=48))
    assert window.index[0] == pd.Timestamp("2026-05-13 10:00", tz="UTC")
    for when, value in window.items():
        matches = recorded[(recorded.index.day_of_week == when.day_of_week) & (recorded.index.hour == when.hour)]
        assert value in set(matches)
    # The source offset is a whole number of weeks.
    sources = [recorded.index[recorded == v][0] for v in window.iloc[:3]]
    assert all((when - src) % pd.Timedelta(weeks=1) == pd.Timedelta(0) for when, src in zip(window.index, sources))


def test_replay_wraps_around_the_recorded_loop():
    index = pd.date_range("2023-01-02", periods=14 * 24, freq="h", tz="UTC")  # two whole weeks from a Monday
    recorded = pd.Series(range(len(index)), index=index, dtype=float)
    recorded.index.freq = "h"
    even = index[0] + pd.Timedelta(weeks=4, hours=3)  # 4 weeks on: first recorded week again
    assert replay_window(recorded, even, even + pd.Timedelta(hours=1)).iloc[0] == 3.0
    odd = even + pd.Timedelta(weeks=1)  # 5 weeks on: second recorded week
    assert replay_window(recorded, odd, odd + pd.Timedelta(hours=1)).iloc[0] == 24 * 7 + 3


def test_replay_needs_a_whole_week():
    index = pd.date_range("2023-01-02", periods=100, freq="h", tz="UTC")
    with pytest.raises(GapError):
        replay_window(pd.Series(1.0, index=index), index[0], index[5])


def test_replay_source_answers_for_any_present_time(carbon_csvs):
    source = FileSource(carbon_csvs["GB"], replay=True)
    forecast = source.forecast(pd.Timedelta(hours=48), now=pd.Timestamp("2031-02-03 00:10", tz="UTC"))
    assert len(forecast) >= 48 and forecast.notna().all()
