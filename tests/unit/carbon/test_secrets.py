"""Credentials come from config, environment or files, and never reach logs, errors or reprs."""

from __future__ import annotations

import base64
import logging
import os
from pathlib import Path

import pandas as pd
import pytest
from werkzeug import Response

from slurm_green.carbon.errors import AuthError, SourceError
from slurm_green.carbon.secrets import CarbonSecrets
from slurm_green.carbon.spec import parse_source_spec

SECRET = "s3cr3t-value-xyz"


def test_environment_and_file_variants(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(f"  {SECRET}\n")
    env = {"ELECTRICITYMAPS_TOKEN_FILE": str(token_file), "WATTTIME_USERNAME": "bob", "WATTTIME_PASSWORD": "pw"}
    secrets = CarbonSecrets.load(env=env)
    assert secrets.electricitymaps_token.get_secret_value() == SECRET
    assert secrets.watttime_username.get_secret_value() == "bob"


def test_a_value_from_the_environment_or_config_is_stripped_like_a_files():
    """A Kubernetes secret made from a file and exported as a variable keeps the file's newline;
    sent as is, the token is refused (the header cannot carry it) and the source never answers."""
    secrets = CarbonSecrets.load({"watttime_password": " pw-1 "}, env={"ELECTRICITYMAPS_TOKEN": f"{SECRET}\n"})
    assert secrets.electricitymaps_token.get_secret_value() == SECRET
    assert secrets.watttime_password.get_secret_value() == "pw-1"


def test_config_wins_over_environment():
    secrets = CarbonSecrets.load({"electricitymaps_token": "from-config"}, env={"ELECTRICITYMAPS_TOKEN": "from-env"})
    assert secrets.electricitymaps_token.get_secret_value() == "from-config"


def test_an_unreadable_secret_file_fails_the_source_that_needs_it_not_the_loading(tmp_path):
    secrets = CarbonSecrets.load(env={"ELECTRICITYMAPS_TOKEN_FILE": str(tmp_path / "nope")})
    with pytest.raises(AuthError, match=r"electricitymaps: cannot read ELECTRICITYMAPS_TOKEN_FILE .*/nope: No such file"):
        secrets.require("electricitymaps_token", "electricitymaps")


@pytest.mark.timeout(20)
def test_a_fifo_a_device_or_a_huge_file_is_refused_at_once_not_read(tmp_path):
    """A ``*_FILE`` naming a FIFO blocked the controller's start until some writer opened it, and
    ``/dev/zero`` was read for ever into memory; a file larger than any credential is not one."""
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    huge = tmp_path / "huge"
    huge.write_bytes(b"x" * (1 << 20))
    cases = {fifo: "not a regular file", Path("/dev/zero"): "not a regular file", huge: "larger than 64 KiB"}
    for path, why in cases.items():
        secrets = CarbonSecrets.load(env={"WATTTIME_PASSWORD_FILE": str(path)})
        with pytest.raises(AuthError, match=f"watttime: cannot read WATTTIME_PASSWORD_FILE {path}: {why}"):
            secrets.require("watttime_password", "watttime")


def test_a_credential_set_in_the_file_variable_by_mistake_is_not_echoed_as_a_path():
    """``ELECTRICITYMAPS_TOKEN_FILE=<the token>``: the error named the "file", that is the token, and
    it went to the log, the tick's notes and the state store."""
    secrets = CarbonSecrets.load(env={"ELECTRICITYMAPS_TOKEN_FILE": SECRET})
    with pytest.raises(AuthError, match="not an absolute path, not shown.*No such file") as info:
        secrets.require("electricitymaps_token", "electricitymaps")
    assert SECRET not in str(info.value) and SECRET not in repr(secrets)


def test_a_missing_credential_names_the_variables_that_exist():
    with pytest.raises(AuthError) as info:
        CarbonSecrets().require("watttime_password", "watttime")
    assert "WATTTIME_PASSWORD or WATTTIME_PASSWORD_FILE in the environment" in str(info.value)
    assert "config" not in str(info.value)  # the controller's config has no such key


def test_a_4xx_body_echoing_the_credentials_is_masked(httpserver):
    source = parse_source_spec(f"electricitymaps:DE?base_url={httpserver.url_for('/v3')}",
                               CarbonSecrets.load(env={"ELECTRICITYMAPS_TOKEN": SECRET}))
    httpserver.expect_request("/v3/carbon-intensity/latest").respond_with_data(f"bad token {SECRET} for DE", status=400)
    with pytest.raises(SourceError) as info:
        source.latest(pd.Timestamp.now(tz="UTC"))
    assert str(info.value).endswith("HTTP 400: bad token *** for DE")


def test_a_4xx_body_is_masked_before_it_is_cut(httpserver):
    """Cut to 200 characters first, a token straddling the cut would keep its prefix."""
    source = parse_source_spec(f"electricitymaps:DE?base_url={httpserver.url_for('/v3')}",
                               CarbonSecrets.load(env={"ELECTRICITYMAPS_TOKEN": SECRET}))
    httpserver.expect_request("/v3/carbon-intensity/latest").respond_with_data("x" * 190 + f" token={SECRET}",
                                                                            status=422)
    with pytest.raises(SourceError) as info:
        source.latest(pd.Timestamp.now(tz="UTC"))
    assert SECRET[:5] not in str(info.value) and "token=***" in str(info.value)


def test_a_4xx_body_echoing_the_basic_authorization_header_is_masked(httpserver):
    """A gateway echoing the request: httpx sends WattTime's login as ``Basic base64(user:password)``."""
    secrets = CarbonSecrets.load(env={"WATTTIME_USERNAME": "site-user", "WATTTIME_PASSWORD": SECRET})
    source = parse_source_spec(f"watttime:CAISO_NORTH?base_url={httpserver.url_for('')}", secrets)
    httpserver.expect_request("/login").respond_with_handler(
        lambda request: Response(f"bad request; Authorization: {request.headers['Authorization']}", status=400))
    with pytest.raises(SourceError) as info:
        source.forecast(pd.Timedelta(hours=1), now=pd.Timestamp.now(tz="UTC"))
    assert base64.b64encode(f"site-user:{SECRET}".encode()).decode() not in str(info.value)
    assert "Authorization: ***" in str(info.value)


def test_secrets_never_appear_in_repr_str_logs_or_errors(caplog, httpserver):
    secrets = CarbonSecrets.load(env={"ELECTRICITYMAPS_TOKEN": SECRET, "WATTTIME_USERNAME": SECRET, "WATTTIME_PASSWORD": SECRET})
    source = parse_source_spec(f"electricitymaps:DE?base_url={httpserver.url_for('/v3')}", secrets)
    httpserver.expect_request("/v3/carbon-intensity/latest").respond_with_data("denied", status=401)
    log = logging.getLogger("slurm_green.test")
    with caplog.at_level(logging.DEBUG):
        log.warning("secrets=%s source=%r", secrets, source)
        log.warning("%r", secrets)
        with pytest.raises(AuthError) as info:
            source.latest(pd.Timestamp.now(tz="UTC"))
        log.exception("refresh failed", exc_info=info.value)
    assert SECRET not in caplog.text
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert SECRET not in repr(secrets) and SECRET not in str(secrets) and SECRET not in repr(source)
    assert "**********" in repr(secrets)
    assert httpserver.log[0][0].headers["auth-token"] == SECRET  # but it did reach the provider
