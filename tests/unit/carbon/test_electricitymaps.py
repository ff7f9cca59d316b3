"""Electricity Maps v3 client against a local server answering in the documented format."""

from __future__ import annotations

import logging

import pandas as pd
import pytest
from http_handlers import hanging
from pydantic import SecretStr

from slurm_green.carbon.electricitymaps import ElectricityMapsSource
from slurm_green.carbon.errors import (
    AuthError,
    CarbonUnavailable,
    DuplicateTimestampError,
    MalformedResponseError,
    SourceError,
    StaleDataError,
)
from slurm_green.carbon.feed import CarbonFeed
from slurm_green.carbon.http import HttpClient
from slurm_green.carbon.secrets import CarbonSecrets
from slurm_green.carbon.spec import parse_sources

TOKEN = "em-secret-token-123"
NOW = pd.Timestamp("2024-05-01 10:20", tz="UTC")


def iso(ts: pd.Timestamp) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def latest_body(value: float = 250.0, when: pd.Timestamp = NOW.floor("h")) -> dict:
    return {
        "zone": "DE",
        "carbonIntensity": value,
        "datetime": iso(when),
        "updatedAt": iso(when),
        "emissionFactorType": "direct",
        "isEstimated": False,
    }


def forecast_body(start: pd.Timestamp, values: list[float]) -> dict:
    points = [{"carbonIntensity": v, "datetime": iso(start + pd.Timedelta(hours=i))} for i, v in enumerate(values)]
    return {"zone": "DE", "forecast": points, "updatedAt": iso(NOW)}


def history_body(end: pd.Timestamp, values: list[float]) -> dict:
    start = end - pd.Timedelta(hours=len(values) - 1)
    points = [
        {"zone": "DE", "carbonIntensity": v, "datetime": iso(start + pd.Timedelta(hours=i)), "isEstimated": False}
        for i, v in enumerate(values)
    ]
    return {"zone": "DE", "history": points}


@pytest.fixture
def source(httpserver) -> ElectricityMapsSource:
    http = HttpClient(httpserver.url_for("/v3"), label="electricitymaps:DE", retries=1, sleep=lambda s: None)
    return ElectricityMapsSource("DE", SecretStr(TOKEN), http=http)


def expect(httpserver, path: str):
    return httpserver.expect_request(
        f"/v3/carbon-intensity/{path}",
        headers={"auth-token": TOKEN},
        query_string={"zone": "DE", "emissionFactorType": "direct"},
    )


def test_latest_reads_value_and_time(httpserver, source):
    expect(httpserver, "latest").respond_with_json(latest_body(312.0))
    reading = source.latest(NOW)
    assert reading.value == 312.0 and reading.time == NOW.floor("h") and reading.source == "electricitymaps:DE"


def test_forecast_starts_with_the_latest_value(httpserver, source):
    expect(httpserver, "latest").respond_with_json(latest_body(300.0))
    expect(httpserver, "forecast").respond_with_json(forecast_body(NOW.floor("h") + pd.Timedelta(hours=1), [280, 260, 240]))
    series = source.forecast(pd.Timedelta(hours=3), now=NOW)
    assert list(series) == [300, 280, 260, 240]
    assert series.index[0] == NOW.floor("h") and str(series.index.tz) == "UTC"


def test_forecast_not_in_plan_falls_back_to_the_model_on_history(httpserver, source, caplog):
    expect(httpserver, "latest").respond_with_json(latest_body(200.0))
    expect(httpserver, "forecast").respond_with_data("Forbidden", status=403)
    expect(httpserver, "history").respond_with_json(history_body(NOW.floor("h"), [200.0] * 24))
    with caplog.at_level(logging.WARNING):
        series = source.forecast(pd.Timedelta(hours=6), now=NOW)
    assert len(series) >= 6 and (series == 200.0).all()  # flat history: the model predicts flat
    assert "built-in forecaster" in caplog.text


@pytest.mark.parametrize("status", [401, 403])
def test_refused_token_is_an_auth_error_without_the_token(httpserver, source, caplog, status):
    expect(httpserver, "latest").respond_with_data("unauthorized", status=status)
    with caplog.at_level(logging.DEBUG), pytest.raises(AuthError) as info:
        source.latest(NOW)
    assert TOKEN not in str(info.value) and TOKEN not in caplog.text and TOKEN not in repr(source)


def test_429_then_success(httpserver, source):
    httpserver.expect_ordered_request("/v3/carbon-intensity/latest").respond_with_data("", status=429, headers={"Retry-After": "0"})
    httpserver.expect_ordered_request("/v3/carbon-intensity/latest").respond_with_json(latest_body(99.0))
    assert source.latest(NOW).value == 99.0


def test_500_is_a_source_error(httpserver, source):
    expect(httpserver, "latest").respond_with_data("oops", status=500)
    with pytest.raises(SourceError, match="500"):
        source.latest(NOW)


def test_a_server_that_does_not_answer_in_time_is_a_source_error(httpserver):
    expect(httpserver, "latest").respond_with_handler(hanging)
    http = HttpClient(httpserver.url_for("/v3"), label="electricitymaps:DE", timeout=0.2, retries=0)
    with pytest.raises(SourceError, match="timed out"):
        ElectricityMapsSource("DE", SecretStr(TOKEN), http=http).latest(NOW)


@pytest.mark.parametrize(
    "body",
    [{"zone": "DE"}, {"zone": "DE", "forecast": "soon"}, {"zone": "DE", "forecast": [{"datetime": "x", "carbonIntensity": 1}]},
     {"zone": "DE", "forecast": [{"datetime": "2024-05-01T11:00:00Z", "carbonIntensity": "high"}]}],
)
def test_malformed_forecast_is_a_typed_error(httpserver, source, body):
    expect(httpserver, "latest").respond_with_json(latest_body())
    expect(httpserver, "forecast").respond_with_json(body)
    with pytest.raises(MalformedResponseError):
        source.forecast(pd.Timedelta(hours=3), now=NOW)


def test_stale_latest_is_rejected(httpserver, source):
    expect(httpserver, "latest").respond_with_json(latest_body(when=NOW - pd.Timedelta(hours=8)))
    with pytest.raises(StaleDataError):
        source.latest(NOW)


def test_conflicting_duplicates_in_the_forecast_are_refused(httpserver, source):
    """Only the current period's forecast value gives way to the latest value; a timestamp the
    forecast itself repeats with other values (a timezone slip upstream) was resolved silently,
    first wins, instead of being refused like any other conflicting duplicate."""
    expect(httpserver, "latest").respond_with_json(latest_body(300.0))
    body = forecast_body(NOW.floor("h") + pd.Timedelta(hours=1), [280, 260, 240])
    body["forecast"].insert(2, {"carbonIntensity": 900, "datetime": body["forecast"][1]["datetime"]})
    expect(httpserver, "forecast").respond_with_json(body)
    with pytest.raises(DuplicateTimestampError, match="conflicting values"):
        source.forecast(pd.Timedelta(hours=3), now=NOW)


def test_the_latest_value_replaces_the_forecasts_for_the_current_period(httpserver, source):
    expect(httpserver, "latest").respond_with_json(latest_body(300.0))
    expect(httpserver, "forecast").respond_with_json(forecast_body(NOW.floor("h"), [999, 260, 240]))
    assert list(source.forecast(pd.Timedelta(hours=2), now=NOW)) == [300, 260, 240]


@pytest.mark.parametrize("change", [{"datetime": "garbage"}, {"datetime": None}, {"datetime": 17},
                                    {"carbonIntensity": "300"}, {"carbonIntensity": 10 ** 400}])
def test_malformed_latest_is_a_typed_error(httpserver, source, change):
    """These came out as pandas/numpy exceptions (logged as a bug of ours, with a traceback), and a
    null datetime as a reading at NaT that passed the staleness check."""
    expect(httpserver, "latest").respond_with_json({**latest_body(), **change})
    with pytest.raises(MalformedResponseError):
        source.latest(NOW)


def test_a_huge_value_quoted_in_an_error_is_cut_short(httpserver, source):
    expect(httpserver, "latest").respond_with_json(latest_body())
    point = {"datetime": "2024-05-01T11:00:00Z", "carbonIntensity": "x" * 100_000}
    expect(httpserver, "forecast").respond_with_json({"zone": "DE", "forecast": [point]})
    with pytest.raises(MalformedResponseError, match=r"value 'x+\.\.\. is not a number") as info:
        source.forecast(pd.Timedelta(hours=3), now=NOW)
    assert len(str(info.value)) < 200


def test_a_cache_of_direct_numbers_is_not_served_once_the_config_asks_for_lifecycle(httpserver, tmp_path):
    """The cache is keyed on the source's name, which omitted the factor: after switching
    ``electricitymaps:DE`` to ``?factor=lifecycle`` the restart served direct numbers as the new config's."""
    expect(httpserver, "latest").respond_with_json(latest_body(300.0))
    expect(httpserver, "forecast").respond_with_json(forecast_body(NOW.floor("h") + pd.Timedelta(hours=1), [280, 260]))
    secrets = CarbonSecrets(electricitymaps_token=SecretStr(TOKEN))
    clock = NOW.timestamp
    cache = tmp_path / "carbon.json"
    base = f"base_url={httpserver.url_for('/v3')}"
    CarbonFeed(parse_sources(f"electricitymaps:DE?{base}", secrets), cache_path=cache, clock=clock).refresh()
    lifecycle = parse_sources(f"electricitymaps:DE?factor=lifecycle&{base}", secrets)
    with pytest.raises(CarbonUnavailable, match="no carbon data yet"):
        CarbonFeed(lifecycle, cache_path=cache, clock=clock).snapshot()
    assert lifecycle.name == "electricitymaps:DE?factor=lifecycle"  # and logs and provenance say which


@pytest.mark.parametrize("token", [TOKEN + "\n", TOKEN + "\r\nX-Evil: 1", "\x00" + TOKEN, TOKEN + "é"])
def test_a_token_no_header_can_carry_is_refused_unsent_and_never_logged(httpserver, caplog, token):
    """Sent, it failed in httpcore, whose DEBUG trace (``[controller] log_level = "DEBUG"``) logged
    ``LocalProtocolError("Illegal header value b'<token>\\n'")`` at every attempt."""
    http = HttpClient(httpserver.url_for("/v3"), label="electricitymaps:DE", retries=1, sleep=lambda s: None)
    source = ElectricityMapsSource("DE", SecretStr(token), http=http)
    with caplog.at_level(logging.DEBUG), pytest.raises(AuthError, match="the auth-token header would hold") as info:
        source.latest(NOW)
    assert TOKEN not in str(info.value) and TOKEN not in caplog.text
    assert len(httpserver.log) == 0
