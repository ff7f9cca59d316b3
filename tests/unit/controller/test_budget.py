"""The period budget: periods from local midnight, the pace rule, and its status from a real store."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from slurm_green.controller.budget import PeriodBudget, period_bounds
from slurm_green.controller.store import StateStore
from slurm_green.core.cluster import Job, JobState
from slurm_green.core.plan import JobDecision

BERLIN = ZoneInfo("Europe/Berlin")


def at(text: str, zone: ZoneInfo = BERLIN) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=zone).timestamp()


def test_a_day_runs_from_local_midnight_and_a_dst_day_is_23_or_25_hours():
    assert period_bounds(at("2026-06-10T15:00"), "day", BERLIN) == (at("2026-06-10T00:00"), at("2026-06-11T00:00"))
    spring = period_bounds(at("2026-03-29T12:00"), "day", BERLIN)
    autumn = period_bounds(at("2026-10-25T12:00"), "day", BERLIN)
    assert spring[1] - spring[0] == 23 * 3600 and autumn[1] - autumn[0] == 25 * 3600


def test_a_day_whose_midnight_repeats_or_is_skipped_is_one_period_from_its_first_instant():
    havana = ZoneInfo("America/Havana")  # 2023-11-05: 01:00 CDT -> 00:00 CST, midnight twice
    first = dt.datetime(2023, 11, 5, 4, 0, tzinfo=dt.timezone.utc).timestamp()  # 00:00 CDT
    second_pass = first + 3600 + 1800  # 00:30 CST, the repeated hour's second pass
    assert period_bounds(second_pass, "day", havana) == period_bounds(first + 60, "day", havana)
    assert period_bounds(second_pass, "day", havana)[0] == first
    santiago = ZoneInfo("America/Santiago")  # 2023-09-03: 00:00 -> 01:00, no midnight
    day = period_bounds(at("2023-09-03T12:00", santiago), "day", santiago)
    assert day[0] == dt.datetime(2023, 9, 3, 4, 0, tzinfo=dt.timezone.utc).timestamp()  # 01:00 -03
    assert day[1] - day[0] == 23 * 3600


def test_a_week_starts_on_monday_and_india_s_half_hour_offset_is_kept():
    start, end = period_bounds(at("2026-11-26T09:00"), "week", BERLIN)  # a Thursday
    assert (start, end) == (at("2026-11-23T00:00"), at("2026-11-30T00:00"))
    kolkata = ZoneInfo("Asia/Kolkata")
    start, _ = period_bounds(at("2026-11-26T09:00", kolkata), "day", kolkata)
    assert start == at("2026-11-26T00:00", kolkata) and start % 900 == 0  # a whole number of usage buckets


@pytest.mark.parametrize("spent, elapsed, scale", [
    (0.0, 0.0, 1.0),     # a fresh period: the configured fraction
    (50.0, 0.5, 1.0),    # on pace
    (75.0, 0.5, 0.5),    # ahead of pace: 25 left where 50 would be: half
    (25.0, 0.5, 1.5),    # behind: 75 left where 50 would be
    (10.0, 0.9, 2.0),    # far behind: held to max_scale
    (100.0, 0.2, 0.5),   # limit reached: min_scale
    (120.0, 1.0, 0.5),
    (60.0, 1.0, 2.0),    # the period's last instant with budget left
])
def test_the_pace_rule(spent, elapsed, scale):
    assert PeriodBudget("carbon", 100.0).pace(spent, elapsed) == pytest.approx(scale)


def test_status_reads_what_ran_this_period_from_the_store(tmp_path):
    store = StateStore(tmp_path / "s.db")
    day = at("2026-06-10T00:00", ZoneInfo("UTC"))
    store.record_decisions(day, [JobDecision(1, start_at=day, expected_energy_kwh=4.0, expected_runtime_s=4 * 3600)])
    # 1 kW from 22:00 the day before to 02:00: two of its four kWh fall in this day
    running = Job(1, state=JobState.RUNNING, start_time=day - 2 * 3600)
    store.account_usage(day + 2 * 3600, [running], None)
    budget = PeriodBudget("energy", 8.0)
    status = budget.status(store, day + 6 * 3600)  # a quarter of the day gone, a quarter of the budget spent
    assert status.spent == pytest.approx(2.0) and status.jobs == 1 and status.scale == pytest.approx(1.0)
    assert "2 of 8 kWh spent with 25% of the period gone" in status.note(day + 6 * 3600)
    history = budget.history(store, day + 6 * 3600, 2)
    assert [h.start for h in history] == [day - 86400, day] and history[0].spent == pytest.approx(2.0)
    assert PeriodBudget("carbon", 8.0).status(store, day + 3600).spent == 0.0  # accounted without a signal
