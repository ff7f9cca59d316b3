"""CSV sources: the real Electricity Maps exports, the generic format, and FileSource."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from slurm_green.carbon.errors import CarbonError, DataValidationError, GapError, SourceError, UnitError
from slurm_green.carbon.feed import CarbonFeed
from slurm_green.carbon.files import FileSource, read_carbon_csv
from slurm_green.carbon.spec import parse_source_spec, parse_sources

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


def test_offsets_that_change_with_dst_are_read_as_the_instants_they_name(tmp_path):
    """Local time written with its offset across the October fall-back (+02:00, then +01:00)."""
    stamps = pd.date_range("2023-10-28 00:00", periods=48, freq="h", tz="Europe/Berlin")
    path = write(tmp_path, "timestamp,value\n" + "".join(f"{t.isoformat()},{100 + i}\n" for i, t in enumerate(stamps)))
    series = read_carbon_csv(path)
    assert list(series.index) == list(stamps.tz_convert("UTC")) and list(series) == list(range(100, 148))


def test_offsets_on_some_rows_only_are_refused_naming_one_without(tmp_path):
    path = write(tmp_path, "timestamp,value\n2023-01-01T00:00+01:00,50\n2023-01-01T01:00,60\n")
    with pytest.raises(DataValidationError, match="some timestamps carry a UTC offset and some do not .row 3 has none"):
        read_carbon_csv(path, tz="Europe/Berlin")


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


def hourly_csv(path, hours: int = 24 * 14, missing: range = range(0), start: str = "2023-05-01T00:00Z"):
    """A generic hourly file of ``hours`` rows from ``start``, without the rows whose index is in ``missing``."""
    stamps = pd.date_range(start, periods=hours, freq="h")
    rows = [f"{t.isoformat()},{200 + (i % 24) * 5}" for i, t in enumerate(stamps) if i not in missing]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


GARBAGE = [
    b"\x00\xff\xfe garbage \x81\x82",                       # not UTF-8
    b"",                                                    # empty
    b"timestamp,value\nyesterday,lots\nnever,-\n",          # right header, nothing usable
    b"Datetime (UTC),Carbon Intensity gCO\xe2\x82\x82eq/kWh (direct)\nnot a time,5\n",  # unparseable stamps
    b'"unterminated\n,,,\n',                                # broken quoting
    b"a;b;c\n1;2;3\n",                                      # another layout
]


@pytest.mark.parametrize("content", GARBAGE)
def test_a_garbage_file_builds_and_fails_only_when_asked_with_a_carbon_error(tmp_path, content):
    path = tmp_path / "ci.csv"
    path.write_bytes(content)
    source = FileSource(path, replay=True)  # building never reads
    with pytest.raises(CarbonError, match="ci.csv"):
        source.forecast(pd.Timedelta(hours=6), now=pd.Timestamp("2026-01-01", tz="UTC"))


def test_the_file_is_read_again_when_it_changes_and_not_otherwise(tmp_path):
    path = tmp_path / "ci.csv"
    source = FileSource(path, replay=True)
    now = pd.Timestamp("2026-01-05 10:30", tz="UTC")
    with pytest.raises(SourceError, match="No such file"):
        source.forecast(pd.Timedelta(hours=6), now=now)
    hourly_csv(path)
    first = source.forecast(pd.Timedelta(hours=6), now=now)
    assert first.notna().all() and len(first) == 7
    recorded = source.recorded
    assert source.recorded is recorded  # unchanged file: not parsed again
    path.write_bytes(b"\x00\xff garbage")
    with pytest.raises(SourceError, match="cannot read carbon CSV"):
        source.forecast(pd.Timedelta(hours=6), now=now)
    with pytest.raises(SourceError, match="cannot read carbon CSV"):  # the same error again, from memory
        source.forecast(pd.Timedelta(hours=6), now=now)
    hourly_csv(path)
    pd.testing.assert_series_equal(source.forecast(pd.Timedelta(hours=6), now=now), first)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file (the Docker campaign runs it as a user)")
def test_an_unreadable_file_says_permission_denied(tmp_path):
    path = hourly_csv(tmp_path / "ci.csv")
    path.chmod(0)
    with pytest.raises(SourceError, match="ci.csv: Permission denied"):
        FileSource(path, replay=True).forecast(pd.Timedelta(hours=1))


def test_a_six_hour_gap_fails_the_file_naming_the_gap_and_the_chain_moves_on(tmp_path):
    gappy = hourly_csv(tmp_path / "gappy.csv", missing=range(100, 106))
    good = hourly_csv(tmp_path / "good.csv")
    with pytest.raises(GapError) as info:
        read_carbon_csv(gappy)
    assert "gappy.csv: 1 gap(s) longer than 0 days 03:00:00" in str(info.value)
    assert "6 point(s) missing from 2023-05-05 04:00:00+00:00" in str(info.value)
    chain = parse_sources([f"csv:{gappy}?replay=1", f"csv:{good}?replay=1"])
    feed = CarbonFeed(chain, clock=lambda: pd.Timestamp("2026-01-05 10:30", tz="UTC").timestamp())
    snap = feed.refresh()
    assert snap.source == f"csv:{good}?replay=1"
    assert "GapError" in snap.failures[f"csv:{gappy}?replay=1"]
    # the admin may accept longer interpolation for this file, in its spec
    assert parse_source_spec(f"csv:{gappy}?replay=1&max_gap=7h").answer(pd.Timedelta(hours=6)).series.notna().all()


@pytest.fixture
def half_hour_zone_file(tmp_path):
    """Three weeks of hourly values in local time of India (UTC+05:30): periods start at :30 UTC."""
    stamps = pd.date_range("2024-01-01T00:00+05:30", periods=24 * 21, freq="h")
    lines = [f"{t.isoformat()},{100 + i % 24}" for i, t in enumerate(stamps)]
    return write(tmp_path, "timestamp,value\n" + "\n".join(lines) + "\n", "in.csv")


HALF_HOUR_NOW = pd.Timestamp("2024-01-03 10:10", tz="UTC")


def test_a_file_on_a_half_hour_grid_answers_from_the_period_holding_now(half_hour_zone_file):
    """``now.floor('1h')`` is 10:00, a period such a file does not have: it failed with "no value for
    the current period" at every refresh."""
    series = FileSource(half_hour_zone_file).forecast(pd.Timedelta(hours=3), now=HALF_HOUR_NOW)
    assert series.index[0] == pd.Timestamp("2024-01-03 09:30", tz="UTC")
    assert series.iloc[0] == 100 + 15  # 09:30 UTC is 15:00 local: the 16th hour of the day


def test_a_replayed_half_hour_grid_keeps_the_files_periods(half_hour_zone_file):
    two_weeks = pd.Timedelta(weeks=2)
    series = FileSource(half_hour_zone_file, replay=True).forecast(pd.Timedelta(hours=3), now=HALF_HOUR_NOW + two_weeks)
    assert series.index[0] == pd.Timestamp("2024-01-03 09:30", tz="UTC") + two_weeks
    assert list(series.iloc[:2]) == [115, 116]


def test_a_model_forecast_on_a_half_hour_grid_starts_with_the_period_holding_now(half_hour_zone_file):
    series = FileSource(half_hour_zone_file, forecast="model").forecast(pd.Timedelta(hours=3),
                                                                       now=HALF_HOUR_NOW + pd.Timedelta(days=10))
    assert series.index[0] == pd.Timestamp("2024-01-13 09:30", tz="UTC")


@pytest.mark.timeout(20)
def test_a_fifo_or_a_device_is_refused_at_once_not_read_for_ever(tmp_path):
    """A FIFO blocked the refresh until some writer opened it, and ``/dev/zero`` was read for ever
    into memory (``carbon check --source csv:/dev/zero?replay=1`` never answered)."""
    fifo = tmp_path / "carbon.csv"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(SourceError, match=f"cannot read carbon CSV {path}: not a regular file"):
            FileSource(path, replay=True).latest()
