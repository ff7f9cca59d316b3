"""UK ESO Carbon Intensity API client against a local server in its documented shapes."""

from __future__ import annotations

import pandas as pd
import pytest
from http_handlers import hanging

from slurm_green.carbon.errors import (
    AuthError,
    MalformedResponseError,
    RateLimitedError,
    SourceError,
    SourceSpecError,
    StaleDataError,
)
from slurm_green.carbon.http import HttpClient
from slurm_green.carbon.ukgrid import UkGridSource

NOW = pd.Timestamp("2024-05-01 10:40", tz="UTC")
FROM = "2024-05-01T10:30Z"


def slots(start: pd.Timestamp, forecasts: list[float], actuals: list[float | None] | None = None) -> list[dict]:
    actuals = actuals or [None] * len(forecasts)
    out = []
    for i, (f, a) in enumerate(zip(forecasts, actuals)):
        t = start + pd.Timedelta(minutes=30 * i)
        out.append({
            "from": t.strftime("%Y-%m-%dT%H:%MZ"),
            "to": (t + pd.Timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%MZ"),
            "intensity": {"forecast": f, "actual": a, "index": "moderate"},
        })
    return out


def make(httpserver, region: int | None = None) -> UkGridSource:
    return UkGridSource(region, http=HttpClient(httpserver.url_for(""), label="ukgrid", retries=0))


def test_national_forecast_prefers_actuals(httpserver):
    start = NOW.floor("30min")
    httpserver.expect_request(f"/intensity/{FROM}/fw48h").respond_with_json(
        {"data": slots(start, [150, 140, 130, 120], [155, None, None, None])}
    )
    series = make(httpserver).forecast(pd.Timedelta(hours=1), now=NOW)
    assert list(series) == [155, 140, 130]
    assert series.index[0] == start and series.index.freq == pd.Timedelta(minutes=30)


def test_regional_forecast_reads_the_nested_shape(httpserver):
    start = NOW.floor("30min")
    rows = [{"from": s["from"], "to": s["to"], "intensity": {"forecast": s["intensity"]["forecast"], "index": "low"},
             "generationmix": [{"fuel": "wind", "perc": 40.0}]} for s in slots(start, [90, 80, 70])]
    httpserver.expect_request(f"/regional/intensity/{FROM}/fw48h/regionid/13").respond_with_json(
        {"data": {"regionid": 13, "dnoregion": "UKPN London", "shortname": "London", "data": rows}}
    )
    assert list(make(httpserver, 13).forecast(pd.Timedelta(hours=1), now=NOW)) == [90, 80, 70]


def test_forecast_that_starts_later_than_now_is_stale(httpserver):
    httpserver.expect_request(f"/intensity/{FROM}/fw48h").respond_with_json(
        {"data": slots(NOW.floor("30min") + pd.Timedelta(hours=2), [150, 140])}
    )
    with pytest.raises(StaleDataError):
        make(httpserver).forecast(pd.Timedelta(hours=1), now=NOW)


@pytest.mark.parametrize("body", [{"data": {}}, {"error": {"code": "400"}}, {"data": [{"from": FROM, "intensity": 5}]}])
def test_malformed_answers(httpserver, body):
    httpserver.expect_request(f"/intensity/{FROM}/fw48h").respond_with_json(body)
    with pytest.raises(MalformedResponseError):
        make(httpserver).forecast(pd.Timedelta(hours=1), now=NOW)


def test_history_range(httpserver):
    start = pd.Timestamp("2024-04-30 10:00", tz="UTC")
    httpserver.expect_request("/intensity/2024-04-30T10:00Z/2024-04-30T11:00Z").respond_with_json(
        {"data": slots(start, [100, 110, 120], [101, 111, 121])}
    )
    assert list(make(httpserver).history(start, start + pd.Timedelta(hours=1))) == [101, 111]


def test_region_ids_are_checked():
    with pytest.raises(SourceSpecError):
        UkGridSource(18)


@pytest.mark.parametrize(("status", "error"),
                         [(401, AuthError), (403, AuthError), (429, RateLimitedError), (500, SourceError)])
def test_refusals_and_server_errors_are_typed(httpserver, status, error):
    httpserver.expect_request(f"/intensity/{FROM}/fw48h").respond_with_data("no", status=status)
    with pytest.raises(error):
        make(httpserver).forecast(pd.Timedelta(hours=1), now=NOW)


def test_a_server_that_does_not_answer_in_time_is_a_source_error(httpserver):
    httpserver.expect_request(f"/intensity/{FROM}/fw48h").respond_with_handler(hanging)
    http = HttpClient(httpserver.url_for(""), label="ukgrid", timeout=0.2, retries=0)
    with pytest.raises(SourceError, match="timed out"):
        UkGridSource(None, http=http).forecast(pd.Timedelta(hours=1), now=NOW)
