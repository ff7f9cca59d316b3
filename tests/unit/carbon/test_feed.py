"""The feed: a tick read never blocks, even while the source hangs; staleness and the disk cache."""

from __future__ import annotations

import logging
import threading
import time

import pandas as pd
import pytest

from slurm_green.carbon.errors import CarbonUnavailable, DataValidationError, SourceError, StaleDataError
from slurm_green.carbon.feed import CarbonFeed
from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.synthetic import SyntheticSource, synthetic_intensity


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Hanging(CarbonSource):
    """Answers once, then blocks every later fetch until released."""

    resolution = pd.Timedelta(hours=1)
    name = "hanging"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.calls = 0

    def history(self, start, end):
        raise NotImplementedError

    def forecast(self, horizon, now=None):
        self.calls += 1
        if self.calls > 1:
            self.entered.set()
            self.release.wait(10)
            raise SourceError("gave up")
        return SyntheticSource().forecast(horizon, now=now)


class Broken(CarbonSource):
    resolution = pd.Timedelta(hours=1)
    name = "broken"

    def history(self, start, end):
        raise SourceError("down")

    def forecast(self, horizon, now=None):
        raise SourceError("down")


T = pd.Timestamp("2025-03-03 08:00", tz="UTC").timestamp()


def test_no_data_yet_is_carbon_unavailable():
    with pytest.raises(CarbonUnavailable, match="no carbon data yet"):
        CarbonFeed(SyntheticSource(), clock=Clock(T)).snapshot()


def test_refresh_then_snapshot_serves_the_source_values():
    feed = CarbonFeed(SyntheticSource(), clock=Clock(T))
    feed.refresh()
    snap = feed.snapshot()
    noon = pd.Timestamp("2025-03-03 12:00", tz="UTC")
    assert snap.source == "synthetic" and snap.synthetic
    assert snap.signal.value_at(noon.timestamp()) == pytest.approx(synthetic_intensity(pd.DatetimeIndex([noon]))[0])


def test_stale_snapshot_becomes_unavailable_with_the_refresh_error():
    clock = Clock(T)
    feed = CarbonFeed(Broken(), clock=clock, max_age=3600)
    feed._snapshot = CarbonFeed(SyntheticSource(), clock=clock).refresh()
    with pytest.raises(SourceError):
        feed.refresh()
    assert feed.snapshot().source == "synthetic"  # old data still within max_age
    clock.t += 3601
    with pytest.raises(CarbonUnavailable, match="down") as info:
        feed.snapshot()
    assert info.value.reasons == {"broken": "down"}


def test_tick_read_never_blocks_while_the_source_hangs():
    source = Hanging()
    feed = CarbonFeed(source, refresh_interval=0.01, retry_interval=0.01)
    feed.start()
    try:
        deadline = time.monotonic() + 5
        while source.calls < 1 or feed._snapshot is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert source.entered.wait(5)  # the background thread is now stuck inside the source
        timings = []
        for _ in range(2000):
            t0 = time.perf_counter()
            snap = feed.snapshot()
            snap.signal.value_at(time.time())
            timings.append(time.perf_counter() - t0)
        timings.sort()
        assert timings[len(timings) // 2] < 1e-3  # median under 1 ms
        assert timings[-1] < 0.05  # even the worst read does not wait for the hung fetch
        assert snap.source == "hanging"  # still the first answer
    finally:
        source.release.set()
        feed.stop()


class Switch(CarbonSource):
    """The synthetic profile under a fixed name, until told to fail."""

    resolution = pd.Timedelta(hours=1)
    name = "switch"

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def history(self, start, end):
        raise NotImplementedError

    def forecast(self, horizon, now=None):
        if self.error is not None:
            raise self.error
        return SyntheticSource().forecast(horizon, now=now)


def test_disk_cache_survives_a_restart_and_respects_max_age(tmp_path):
    path = tmp_path / "carbon.json"
    clock = Clock(T)
    first = CarbonFeed(Switch(), cache_path=path, clock=clock)
    first.refresh()
    restarted = CarbonFeed(Switch(SourceError("down")), cache_path=path, clock=clock, max_age=3600)
    snap = restarted.snapshot()
    assert snap.source == "switch"
    assert snap.signal.value_at(T) == first.snapshot().signal.value_at(T)
    clock.t += 7200
    with pytest.raises(CarbonUnavailable, match="old"):
        restarted.snapshot()


def test_a_cache_fetched_after_now_is_not_served_as_fresh(tmp_path):
    """Written while the clock ran a year ahead: its age is negative, which passed as fresh for a year."""
    path = tmp_path / "carbon.json"
    CarbonFeed(Switch(), cache_path=path, clock=Clock(T + 365 * 86400)).refresh()
    restarted = CarbonFeed(Switch(SourceError("down")), cache_path=path, clock=Clock(T), max_age=3600)
    with pytest.raises(CarbonUnavailable, match="fetched 31536000 s after now"):
        restarted.snapshot()


def test_after_the_clock_goes_back_the_last_snapshot_is_not_fresh():
    clock = Clock(T + 30 * 86400)
    feed = CarbonFeed(SyntheticSource(), clock=clock, max_age=3600)
    feed.refresh()
    clock.t = T  # NTP corrects a clock that ran a month ahead
    with pytest.raises(CarbonUnavailable, match="the clock went back"):
        feed.snapshot()


def test_a_refresh_finishing_during_the_tick_is_served():
    """The tick takes ``now`` at its start and reads the feed after asking Slurm; a refresh in between
    was fetched a little after that ``now``, and is the freshest there is."""
    clock = Clock(T)
    feed = CarbonFeed(SyntheticSource(), clock=clock, max_age=3600)
    feed.refresh()
    assert feed.snapshot(T - 60).source == "synthetic"


def test_corrupt_cache_is_ignored(tmp_path, caplog):
    path = tmp_path / "carbon.json"
    path.write_text("{not json")
    feed = CarbonFeed(SyntheticSource(), cache_path=path, clock=Clock(T))
    assert "unreadable carbon cache" in caplog.text
    with pytest.raises(CarbonUnavailable):
        feed.snapshot()


def test_a_cache_written_under_other_sources_is_not_served(tmp_path, caplog):
    """Say the admin removed 'synthetic' from the config: its cached numbers must not drive the restart."""
    path = tmp_path / "carbon.json"
    CarbonFeed(SyntheticSource(), cache_path=path, clock=Clock(T)).refresh()
    with caplog.at_level(logging.INFO):
        restarted = CarbonFeed(Broken(), cache_path=path, clock=Clock(T))
    assert "is from sources 'synthetic', not 'broken': ignored" in caplog.text
    with pytest.raises(CarbonUnavailable, match="no carbon data yet"):
        restarted.snapshot()


class Gappy(CarbonSource):
    """A source that answers a forecast with a hole in it (the signal cannot hold NaN)."""

    resolution = pd.Timedelta(hours=1)
    name = "gappy"

    def history(self, start, end):
        raise NotImplementedError

    def forecast(self, horizon, now=None):
        series = SyntheticSource().forecast(horizon, now=now)
        series.iloc[3:9] = float("nan")
        return series


class Crashing(Broken):
    name = "crashing"

    def forecast(self, horizon, now=None):
        raise ZeroDivisionError("a bug")


@pytest.mark.parametrize(("source", "error", "message"), [
    (Gappy(), DataValidationError, "gappy: the forecast has 6 missing value"),
    (Crashing(), SourceError, "crashing: unexpected ZeroDivisionError: a bug"),
])
def test_refresh_raises_only_carbon_errors_whatever_the_source_does(source, error, message):
    feed = CarbonFeed(source, clock=Clock(T))
    with pytest.raises(error, match=message):
        feed.refresh()
    assert isinstance(feed.last_error, error)
    with pytest.raises(CarbonUnavailable, match=message):
        feed.snapshot()


def test_a_failing_source_is_logged_once_per_change_and_its_recovery_once(caplog):
    clock = Clock(T)
    source = Switch(SourceError("csv /x: cannot read: Permission denied"))
    feed = CarbonFeed(source, clock=clock)
    with caplog.at_level(logging.INFO, logger="slurm_green.carbon"):
        for _ in range(3):
            with pytest.raises(SourceError):
                feed.refresh()
        source.error = StaleDataError("data is 3605 s old")
        for age in (3605, 3665, 3725):  # the same failure with other numbers: said once
            source.error = StaleDataError(f"data is {age} s old")
            with pytest.raises(StaleDataError):
                feed.refresh()
        source.error = None
        feed.refresh()
        feed.refresh()
    lines = [r.getMessage() for r in caplog.records if r.name == "slurm_green.carbon.feed"]
    assert lines == [
        "no carbon data from switch (carbon-agnostic once the last forecast is 10800 s old): "
        "SourceError: csv /x: cannot read: Permission denied",
        "no carbon data from switch (carbon-agnostic once the last forecast is 10800 s old): "
        "StaleDataError: data is 3605 s old",
        "carbon data from switch again",
    ]


def test_a_read_only_feed_uses_the_cache_but_never_creates_it(tmp_path):
    path = tmp_path / "cache" / "carbon.json"
    looking = CarbonFeed(Switch(), cache_path=path, clock=Clock(T), read_only=True)
    looking.refresh()
    assert not path.parent.exists()  # nothing created, not even the directory
    CarbonFeed(Switch(), cache_path=path, clock=Clock(T)).refresh()
    written = path.read_bytes()
    CarbonFeed(Switch(), cache_path=path, clock=Clock(T + 60), read_only=True).refresh()
    assert path.read_bytes() == written
    assert CarbonFeed(Switch(SourceError("down")), cache_path=path, clock=Clock(T), read_only=True).snapshot()
