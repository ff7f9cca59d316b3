"""WattTime v3 client against a local server: basic-auth login, bearer token, lbs/MWh conversion."""

from __future__ import annotations

import base64
import logging

import pandas as pd
import pytest
from http_handlers import hanging
from pydantic import SecretStr

from slurm_green.carbon.errors import AuthError, MalformedResponseError, RateLimitedError, SourceError, UnitError
from slurm_green.carbon.http import HttpClient
from slurm_green.carbon.watttime import WattTimeSource

USER, PASSWORD, TOKEN = "alice", "wt-pass-Secret!", "jwt-token-abc"
NOW = pd.Timestamp("2024-05-01 10:02", tz="UTC")
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def moer_body(start: pd.Timestamp, lbs: list[float], units: str = "lbs_co2_per_mwh") -> dict:
    data = [{"point_time": (start + pd.Timedelta(minutes=5 * i)).isoformat(), "value": v} for i, v in enumerate(lbs)]
    meta = {
        "data_point_period_seconds": 300,
        "region": "CAISO_NORTH",
        "signal_type": "co2_moer",
        "units": units,
        "generated_at": start.isoformat(),
        "generated_at_period_seconds": 300,
    }
    return {"data": data, "meta": meta}


@pytest.fixture
def source(httpserver) -> WattTimeSource:
    http = HttpClient(httpserver.url_for(""), label="watttime:CAISO_NORTH", retries=0, sleep=lambda s: None)
    return WattTimeSource("CAISO_NORTH", SecretStr(USER), SecretStr(PASSWORD), http=http)


def expect_login(httpserver, token: str = TOKEN):
    httpserver.expect_request("/login", headers={"Authorization": BASIC}).respond_with_json({"token": token})


def expect_forecast(httpserver, token: str = TOKEN):
    return httpserver.expect_request(
        "/v3/forecast",
        headers={"Authorization": f"Bearer {token}"},
        query_string={"region": "CAISO_NORTH", "signal_type": "co2_moer", "horizon_hours": "1"},
    )


def test_forecast_logs_in_and_converts_lbs_to_grams(httpserver, source):
    expect_login(httpserver)
    expect_forecast(httpserver).respond_with_json(moer_body(NOW.floor("5min"), [1000.0] * 13))
    series = source.forecast(pd.Timedelta(hours=1), now=NOW)
    assert series.iloc[0] == pytest.approx(453.592)  # 1000 lbs/MWh
    assert series.index.freq == pd.Timedelta(minutes=5) and str(series.index.tz) == "UTC"


def test_expired_token_triggers_one_new_login(httpserver, source):
    httpserver.expect_ordered_request("/login").respond_with_json({"token": "old"})
    httpserver.expect_ordered_request("/v3/forecast").respond_with_data("expired", status=401)
    httpserver.expect_ordered_request("/login").respond_with_json({"token": TOKEN})
    httpserver.expect_ordered_request("/v3/forecast", headers={"Authorization": f"Bearer {TOKEN}"}).respond_with_json(
        moer_body(NOW.floor("5min"), [800.0] * 13)
    )
    assert source.forecast(pd.Timedelta(hours=1), now=NOW).iloc[0] == pytest.approx(800 * 0.453592)


def test_refused_login_never_shows_the_password(httpserver, source, caplog):
    httpserver.expect_request("/login").respond_with_data("bad credentials", status=403)
    with caplog.at_level(logging.DEBUG), pytest.raises(AuthError) as info:
        source.forecast(pd.Timedelta(hours=1), now=NOW)
    for secret in (PASSWORD, BASIC, TOKEN):
        assert secret not in str(info.value) and secret not in caplog.text and secret not in repr(source)


def test_unknown_units_are_refused(httpserver, source):
    expect_login(httpserver)
    expect_forecast(httpserver).respond_with_json(moer_body(NOW.floor("5min"), [300.0] * 13, units="percentile"))
    with pytest.raises(UnitError, match="percentile"):
        source.forecast(pd.Timedelta(hours=1), now=NOW)


def test_login_without_token_is_malformed(httpserver, source):
    httpserver.expect_request("/login").respond_with_json({"detail": "ok"})
    with pytest.raises(MalformedResponseError, match="token"):
        source.forecast(pd.Timedelta(hours=1), now=NOW)


def test_history_uses_the_historical_endpoint(httpserver, source):
    expect_login(httpserver)
    start = NOW.floor("h") - pd.Timedelta(hours=1)
    httpserver.expect_request("/v3/historical").respond_with_json(moer_body(start, [1100.0] * 12))
    series = source.history(start, start + pd.Timedelta(hours=1))
    assert len(series) == 12 and series.iloc[-1] == pytest.approx(1100 * 0.453592)
    assert httpserver.log[-1][0].args["start"] == start.isoformat()


@pytest.mark.parametrize(("status", "error"), [(429, RateLimitedError), (500, SourceError)])
def test_refusals_of_the_data_endpoint_are_typed(httpserver, source, status, error):
    expect_login(httpserver)
    expect_forecast(httpserver).respond_with_data("no", status=status)
    with pytest.raises(error):
        source.forecast(pd.Timedelta(hours=1), now=NOW)


def test_a_token_refused_again_after_a_new_login_is_an_auth_error(httpserver, source):
    expect_login(httpserver)
    expect_forecast(httpserver).respond_with_data("expired", status=401)
    with pytest.raises(AuthError):
        source.forecast(pd.Timedelta(hours=1), now=NOW)


def test_a_login_that_does_not_answer_in_time_is_a_source_error(httpserver):
    httpserver.expect_request("/login").respond_with_handler(hanging)
    http = HttpClient(httpserver.url_for(""), label="watttime:CAISO_NORTH", timeout=0.2, retries=0)
    with pytest.raises(SourceError, match="timed out"):
        WattTimeSource("CAISO_NORTH", SecretStr(USER), SecretStr(PASSWORD), http=http).forecast(
            pd.Timedelta(hours=1), now=NOW)


@pytest.mark.parametrize("meta", [[1], {"units": "lbs_co2_per_mwh", "generated_at": "garbage"}])
def test_malformed_meta_is_a_typed_error(httpserver, source, meta):
    """These came out as AttributeError and DateParseError: reported as a bug of ours."""
    expect_login(httpserver)
    expect_forecast(httpserver).respond_with_json({**moer_body(NOW.floor("5min"), [1000.0] * 13), "meta": meta})
    with pytest.raises(MalformedResponseError):
        source.forecast(pd.Timedelta(hours=1), now=NOW)


def test_a_generated_at_without_offset_is_read_as_utc(httpserver, source):
    body = moer_body(NOW.floor("5min"), [1000.0] * 13)
    body["meta"]["generated_at"] = "2024-05-01T10:00:00"
    expect_login(httpserver)
    expect_forecast(httpserver).respond_with_json(body)
    assert source.forecast(pd.Timedelta(hours=1), now=NOW).iloc[0] == pytest.approx(453.592)
