"""CSV sources: the real Electricity Maps exports, the generic format, and FileSource."""

from __future__ import annotations

import pandas as pd
import pytest

from slurm_green.carbon.errors import DataValidationError, GapError, SourceError, UnitError
from slurm_green.carbon.files import FileSource, read_carbon_csv

# Means and ranges published in shared/data/PROVENANCE.md (computed there, not by this code).
PROVENANCE = {"NO": (9, 1, 48), "DE-LU": (308, 84, 640), "SG": (369, 338, 380), "GB": (129, 4, 282)}


@pytest.mark.parametrize("region", sorted(PROVENANCE))
def test_real_exports_read_as_a_full_hourly_utc_year(carbon_csvs, region):
    series = read_carbon_csv(carbon_csvs[region])
    mean, low, high = PROVENANCE[region]
    assert len(series) == 8760
    assert series.index[0] == pd.Timestamp("2023-01-01 00:00", tz="UTC")
    assert series.index[-1] == pd.Timestamp("2023-12-31 23:00", tz="UTC")
    assert series.index.freq == pd.Timedelta(hours=1)
    assert round(series.mean()) == mean
    assert round(series.min()) == low and round(series.max()) == high


def test_lca_column_is_selectable_and_higher_than_direct(carbon_csvs):
    direct = read_carbon_csv(carbon_csvs["DE-LU"])
    lca = read_carbon_csv(carbon_csvs["DE-LU"], column="lca")
    assert (lca >= direct).mean() > 0.99


def write(tmp_path, text: str, name: str = "ci.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_generic_format_with_stated_timezone_is_converted_to_utc(tmp_path):
    path = write(tmp_path, "timestamp,value\n2023-07-01 10:00,100\n2023-07-01 11:00,110\n2023-07-01 12:00,120\n")
    series = read_carbon_csv(path, tz="Europe/Berlin")
    assert series.index[0] == pd.Timestamp("2023-07-01 08:00", tz="UTC")  # CEST = UTC+2
    assert list(series) == [100, 110, 120]


def test_generic_format_with_offsets_needs_no_tz(tmp_path):
    path = write(tmp_path, "timestamp,value\n2023-01-01T00:00+01:00,50\n2023-01-01T01:00+01:00,60\n")
    assert read_carbon_csv(path).index[0] == pd.Timestamp("2022-12-31 23:00", tz="UTC")


def test_generic_units_are_converted(tmp_path):
    lbs = write(tmp_path, "timestamp,value\n2023-01-01T00:00Z,1000\n2023-01-01T01:00Z,1200\n", "lbs.csv")
    assert read_carbon_csv(lbs, unit="lbs/MWh").iloc[0] == pytest.approx(453.592)
    kg = write(tmp_path, "timestamp,value\n2023-01-01T00:00Z,0.25\n2023-01-01T01:00Z,0.3\n", "kg.csv")
    assert read_carbon_csv(kg, unit="kg/kWh").iloc[0] == pytest.approx(250.0)


def test_lbs_passed_off_as_grams_is_refused(tmp_path):
    rows = "\n".join(f"2023-01-01T{h:02d}:00Z,{1800 + h}" for h in range(24))
    with pytest.raises(UnitError):
        read_carbon_csv(write(tmp_path, "timestamp,value\n" + rows + "\n"))


def test_unknown_layout_and_missing_file_are_clear_errors(tmp_path):
    with pytest.raises(DataValidationError, match="unknown CSV layout"):
        read_carbon_csv(write(tmp_path, "when,co2\n2023-01-01,5\n"))
    with pytest.raises(SourceError, match="cannot read"):
        read_carbon_csv(tmp_path / "missing.csv")


def test_file_source_answers_inside_its_span_and_says_so_outside(carbon_csvs):
    source = FileSource(carbon_csvs["GB"])
    at = pd.Timestamp("2023-03-10 14:25", tz="UTC")
    forecast = source.forecast(pd.Timedelta(hours=6), now=at)
    recorded = read_carbon_csv(carbon_csvs["GB"])
    assert forecast.index[0] == pd.Timestamp("2023-03-10 14:00", tz="UTC")
    pd.testing.assert_series_equal(forecast, recorded.loc[forecast.index[0] : forecast.index[-1]], check_freq=False)
    assert source.latest(at).value == recorded.loc["2023-03-10 14:00+00:00"]
    with pytest.raises(GapError, match="replay=1"):
        source.forecast(pd.Timedelta(hours=6), now=pd.Timestamp("2026-01-01", tz="UTC"))


def test_model_forecast_from_a_file_never_reads_the_future(carbon_csvs, tmp_path):
    at = pd.Timestamp("2023-06-15 09:00", tz="UTC")
    original = pd.read_csv(carbon_csvs["DE-LU"])
    tampered = original.copy()
    future = pd.to_datetime(tampered["Datetime (UTC)"]) > at.tz_localize(None)
    tampered.loc[future, "Carbon Intensity gCO₂eq/kWh (direct)"] = 999.0
    path = tmp_path / "tampered.csv"
    tampered.to_csv(path, index=False)
    honest = FileSource(carbon_csvs["DE-LU"], forecast="model").forecast(pd.Timedelta(hours=24), now=at)
    peeked = FileSource(path, forecast="model").forecast(pd.Timedelta(hours=24), now=at)
    pd.testing.assert_series_equal(honest, peeked)
