"""The fallback chain: first healthy source wins, failures are recorded, total failure is typed."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from slurm_green.carbon.chain import FallbackChain
from slurm_green.carbon.errors import CarbonUnavailable, SourceError, StaleDataError
from slurm_green.carbon.failures import FailureLog
from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.synthetic import SyntheticSource

NOW = pd.Timestamp("2024-05-01 10:00", tz="UTC")


class Failing(CarbonSource):
    resolution = pd.Timedelta(hours=1)

    def __init__(self, name: str, error: Exception) -> None:
        self.name, self.error, self.calls = name, error, 0

    def history(self, start, end):
        raise self.error

    def forecast(self, horizon, now=None):
        self.calls += 1
        raise self.error


def test_first_healthy_source_wins_and_later_ones_are_not_called():
    later = Failing("later", SourceError("should not be asked"))
    answer = FallbackChain([SyntheticSource(), later]).answer(pd.Timedelta(hours=3), now=NOW)
    assert answer.source == "synthetic" and answer.synthetic and answer.failures == {}
    assert later.calls == 0


def test_failures_are_recorded_and_the_next_source_answers():
    chain = FallbackChain([Failing("electricitymaps:DE", SourceError("HTTP 500")), Failing("ukgrid", StaleDataError("old")), SyntheticSource()])
    answer = chain.answer(pd.Timedelta(hours=3), now=NOW)
    assert answer.source == "synthetic"
    assert set(answer.failures) == {"electricitymaps:DE", "ukgrid"}
    assert "HTTP 500" in answer.failures["electricitymaps:DE"] and "StaleDataError" in answer.failures["ukgrid"]


def test_a_crashing_source_does_not_hide_the_others():
    answer = FallbackChain([Failing("buggy", ZeroDivisionError("bug")), SyntheticSource()]).answer(pd.Timedelta(hours=1), now=NOW)
    assert answer.source == "synthetic" and "ZeroDivisionError" in answer.failures["buggy"]


def test_all_failing_is_carbon_unavailable_with_every_reason():
    chain = FallbackChain([Failing("a", SourceError("down")), Failing("b", StaleDataError("old"))])
    with pytest.raises(CarbonUnavailable) as info:
        chain.forecast(pd.Timedelta(hours=1), now=NOW)
    assert set(info.value.reasons) == {"a", "b"} and "down" in str(info.value)


def test_chain_of_real_sources_is_synthetic_only_if_all_are():
    assert FallbackChain([SyntheticSource()]).synthetic
    assert not FallbackChain([Failing("x", SourceError("")), SyntheticSource()]).synthetic


class Holed(CarbonSource):
    """Answers a forecast with missing values: unusable, so the chain must move on."""

    resolution = pd.Timedelta(hours=1)
    name = "holed"

    def history(self, start, end):
        raise NotImplementedError

    def forecast(self, horizon, now=None):
        series = SyntheticSource().forecast(horizon, now=now)
        series.iloc[2] = float("nan")
        return series


def test_a_source_answering_unusable_numbers_is_a_failing_source():
    answer = FallbackChain([Holed(), SyntheticSource()]).answer(pd.Timedelta(hours=6), now=NOW)
    assert answer.source == "synthetic"
    assert answer.failures == {"holed": "GapError: holed: the forecast has 1 missing value(s) from 2024-05-01 12:00:00+00:00"}


def test_each_member_failure_is_logged_once_per_change(caplog):
    flaky = Failing("ukgrid", SourceError("ukgrid /intensity: HTTP 503 after 4 attempts"))
    chain = FallbackChain([flaky, SyntheticSource()])
    with caplog.at_level(logging.INFO, logger="slurm_green.carbon.chain"):
        for _ in range(5):
            chain.answer(pd.Timedelta(hours=1), now=NOW)
        flaky.error = ZeroDivisionError("bug")
        chain.answer(pd.Timedelta(hours=1), now=NOW)
        chain.answer(pd.Timedelta(hours=1), now=NOW)
    records = [r for r in caplog.records if r.name == "slurm_green.carbon.chain"]
    assert [r.getMessage() for r in records] == [
        "carbon source ukgrid failing, falling through to the next: "
        "SourceError: ukgrid /intensity: HTTP 503 after 4 attempts",
        "carbon source ukgrid failing, falling through to the next: unexpected ZeroDivisionError: bug",
    ]
    assert records[0].levelname == "WARNING" and records[1].levelname == "ERROR" and records[1].exc_info


def test_a_member_that_answers_again_is_said_once():
    log = logging.getLogger("test.chain")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    failures = FailureLog(log)
    failures.failed("csv:/x", SourceError("gone"))
    failures.answered("csv:/x")
    failures.answered("csv:/x")
    failures.answered("never-failed")
    assert seen == ["carbon source csv:/x failing, falling through to the next: SourceError: gone",
                    "carbon source csv:/x answers again"]
