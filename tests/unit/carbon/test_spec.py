"""Source specs: every kind, options, chains and clear errors."""

from __future__ import annotations

import pandas as pd
import pytest
from pydantic import SecretStr

from slurm_green.carbon.chain import FallbackChain
from slurm_green.carbon.electricitymaps import ElectricityMapsSource
from slurm_green.carbon.errors import AuthError, SourceError, SourceSpecError
from slurm_green.carbon.files import FileSource
from slurm_green.carbon.secrets import CarbonSecrets
from slurm_green.carbon.spec import parse_source_spec, parse_sources
from slurm_green.carbon.synthetic import SyntheticSource
from slurm_green.carbon.ukgrid import UkGridSource
from slurm_green.carbon.watttime import WattTimeSource

SECRETS = CarbonSecrets(
    electricitymaps_token=SecretStr("tok"), watttime_username=SecretStr("u"), watttime_password=SecretStr("p")
)


def test_each_kind(carbon_csvs):
    assert isinstance(parse_source_spec("synthetic"), SyntheticSource)
    em = parse_source_spec("electricitymaps:DE?factor=lifecycle", SECRETS)
    assert isinstance(em, ElectricityMapsSource) and em.zone == "DE" and em.emission_factor == "lifecycle"
    wt = parse_source_spec("watttime:CAISO_NORTH", SECRETS)
    assert isinstance(wt, WattTimeSource) and wt.region == "CAISO_NORTH"
    assert parse_source_spec("ukgrid").region is None
    assert parse_source_spec("ukgrid:13").region == 13 and isinstance(parse_source_spec("ukgrid:13"), UkGridSource)
    csv = parse_source_spec(f"csv:{carbon_csvs['GB']}?replay=1&forecast=model")
    assert isinstance(csv, FileSource) and csv.replay and csv.forecast_mode == "model"


def test_chains_from_commas_and_lists(carbon_csvs):
    chain = parse_sources(["ukgrid, synthetic", f"csv:{carbon_csvs['NO']}?replay=yes"])
    assert isinstance(chain, FallbackChain)
    assert [s.name for s in chain.sources][:2] == ["ukgrid", "synthetic"]
    assert isinstance(parse_sources("synthetic"), SyntheticSource)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nonsense:1", "unknown source kind"),
        ("csv:", "needs a path"),
        ("csv:/x.csv?replay=maybe", "not a boolean"),
        ("csv:/x.csv?tz=UTC&colour=red", "unknown option"),
        ("electricitymaps", "needs a zone"),
        ("ukgrid:london", "number 1..17"),
        ("ukgrid:42", "1..17"),
        ("synthetic:fast", "no argument"),
        ("ukgrid?a", "malformed options"),
        ("csv:/x.csv?tz=Mars/Olympus", "not a timezone name"),
        ("csv:/x.csv?unit=furlongs", "unit must be one of"),
        ("csv:/x.csv?column=lifecycle", "column must be one of"),
        ("csv:/x.csv?forecast=psychic", "forecast must be one of"),
        ("csv:/x.csv?max_gap=-3h", "not a positive duration"),
        ("csv:/x.csv?max_gap=soon", "not a positive duration"),
        ("csv:/x.csv?max_gap=3", "not a positive duration"),  # was 3 ns: every missing point failed the file
        ("electricitymaps:DE?factor=lca", "allowed: \\['direct', 'lifecycle'\\]"),
    ],
)
def test_errors_name_the_problem(spec, message):
    with pytest.raises(SourceSpecError, match=message):
        parse_source_spec(spec)


def test_a_plus_in_an_option_is_a_plus():
    """Read as form encoding, ``tz=Etc/GMT+5`` (a fixed UTC-5 zone, as US grid data often is) became
    "Etc/GMT 5" and the spec was refused."""
    assert parse_source_spec("csv:/x.csv?tz=Etc/GMT+5&max_gap=1h30min")._read_options["tz"] == "Etc/GMT+5"


def test_building_a_source_reads_no_file_and_needs_no_credential(tmp_path):
    """What is missing at start fails at the first request, as that source, so the chain moves on."""
    missing = parse_source_spec(f"csv:{tmp_path / 'missing.csv'}?replay=1")
    with pytest.raises(SourceError, match="cannot read carbon CSV .*missing.csv: No such file"):
        missing.forecast(pd.Timedelta(hours=1))
    em = parse_source_spec("electricitymaps:DE?base_url=http://127.0.0.1:9", CarbonSecrets())
    with pytest.raises(AuthError, match="ELECTRICITYMAPS_TOKEN"):
        em.latest()
    wt = parse_source_spec("watttime:CAISO_NORTH?base_url=http://127.0.0.1:9", CarbonSecrets())
    with pytest.raises(AuthError, match="WATTTIME_USERNAME"):
        wt.forecast(pd.Timedelta(hours=1))


def test_empty_chain_is_an_error():
    with pytest.raises(SourceSpecError):
        parse_sources(" , ")


@pytest.mark.parametrize("url", ["api.electricitymap.org", "localhost:8080", "ftp://example.org", "http://",
                                 "http://[::1", "http://xn--a.com"])
@pytest.mark.parametrize("kind", ["electricitymaps:DE", "watttime:CAISO_NORTH", "ukgrid:"])
def test_a_base_url_that_is_no_http_url_is_refused_with_the_spec(kind, url):
    """Such a URL was accepted, and the source failed at each refresh with httpx's own error
    (``InvalidURL``, or a request to a relative path), never naming the configuration at fault."""
    with pytest.raises(SourceSpecError, match=r"base_url=.* is not an http\(s\) URL with a host"):
        parse_source_spec(f"{kind}?base_url={url}", CarbonSecrets())
