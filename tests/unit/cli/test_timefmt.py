"""Times as the user commands show and read them: UTC by default, the machine's zone with --local-time."""

from __future__ import annotations

import time

import click
import pytest
from rich.console import Console

from slurm_green.cli.status import render
from slurm_green.cli.timefmt import iso, parse_time, relative, stamp
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState

T = 1_790_000_000.0  # 2026-09-21 14:13:20 UTC


@pytest.fixture
def tokyo(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_utc_by_default_and_the_machines_zone_on_request(tokyo):
    assert stamp(T) == "2026-09-21 14:13 UTC" and stamp(T, local=True) == "2026-09-21 23:13 JST"
    assert iso(T) == "2026-09-21T14:13:20+00:00" and iso(T, local=True) == "2026-09-21T23:13:20+09:00"
    assert stamp(None) == "-" and iso(None) is None


def test_typed_times_follow_the_same_choice(tokyo):
    assert parse_time("2026-09-21T14:00", T, local=False, sign=1, option="--x") == T - 800
    assert parse_time("2026-09-21T23:00", T, local=True, sign=1, option="--x") == T - 800
    assert parse_time("2026-09-21T14:00+00:00", T, local=True, sign=1, option="--x") == T - 800
    assert parse_time("12h", T, local=False, sign=1, option="--x") == T + 12 * 3600
    assert parse_time("7d", T, local=False, sign=-1, option="--x") == T - 7 * 86400
    with pytest.raises(click.BadParameter, match="neither a duration"):
        parse_time("soon", T, local=False, sign=1, option="--x")


@pytest.mark.parametrize("text, sign", [("1000000d", -1), ("1000000d", 1), ("9" * 400 + "d", -1),
                                        ("0001-01-01", -1), ("9999-12-31T23:59", 1), ("2127-01-01", 1)])
@pytest.mark.parametrize("local", [False, True])
def test_a_time_more_than_a_century_away_is_a_usage_error(tokyo, text, sign, local):
    """``stamp`` could not show 1000000d ago (before year 1): that was an internal error, exit 70."""
    with pytest.raises(click.BadParameter, match="more than 100 years from now"):
        parse_time(text, T, local=local, sign=sign, option="--x")
    assert parse_time("36500d", T, local=local, sign=sign, option="--x") == T + sign * 36500 * 86400


def test_relative():
    assert relative(T + 9000, T) == "in 2.5 h" and relative(T - 180, T) == "3 min ago" and relative(T + 5, T) == "now"


def test_status_shows_local_time_on_request(tokyo):
    snapshot = ClusterSnapshot(taken_at=T, jobs=(Job(1, user="alice", state=JobState.RUNNING, start_time=T),))
    console = Console(record=True, width=200)
    render(snapshot, console, local=True)
    text = console.export_text()
    assert "2026-09-21 23:13 JST" in text and "UTC" not in text
    console = Console(record=True, width=200)
    render(snapshot, console)
    assert "2026-09-21 14:13 UTC" in console.export_text()
