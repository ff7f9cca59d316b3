"""Carbon for simulations: the spec syntax of the controller and `carbon`, replayed onto the trace."""

from __future__ import annotations

import pandas as pd
import pytest

from slurm_green.sim.carbon import replayed_series

START = pd.Timestamp("2017-10-02 00:00", tz="UTC").timestamp()  # a Monday, years before the file


def naive_berlin_csv(path) -> str:
    """Two weeks of hourly values with naive local (Berlin) stamps: needs ``tz=`` to be read."""
    stamps = pd.date_range("2023-05-01 00:00", periods=24 * 14, freq="h")
    path.write_text("timestamp,value\n" + "\n".join(f"{t:%Y-%m-%d %H:%M},{100 + t.hour}" for t in stamps) + "\n")
    return str(path)


def test_a_csv_spec_with_options_is_accepted_and_replayed(tmp_path):
    path = naive_berlin_csv(tmp_path / "f.csv")
    series = replayed_series(f"csv:{path}?tz=Europe/Berlin", START, START + 86400)
    assert series.notna().all() and series.index[0] == pd.Timestamp("2017-10-02 00:00", tz="UTC")
    # local 02:00 in Berlin (CEST, UTC+2) is 00:00 UTC: the stated tz was applied, then replayed by weeks
    assert series.iloc[0] == 102


def test_without_tz_the_same_file_is_a_one_line_value_error(tmp_path):
    path = naive_berlin_csv(tmp_path / "f.csv")
    with pytest.raises(ValueError, match=r"carbon 'csv:.*f.csv': .*no timezone and none was stated \(use tz=...\)"):
        replayed_series(f"csv:{path}", START, START + 86400)


@pytest.mark.parametrize(("spec", "message"), [
    ("ukgrid", "a simulation needs recorded data"),
    ("csv:/nonexistent.csv", "cannot read carbon CSV /nonexistent.csv: No such file"),
    ("csv:/x.csv?colour=red", "unknown option"),
    ("Atlantis", "a simulation needs recorded data"),
])
def test_what_a_simulation_cannot_use_is_a_value_error_naming_the_spec(spec, message):
    with pytest.raises(ValueError, match=message):
        replayed_series(spec, START, START + 3600)


def test_replay_0_keeps_recorded_times(tmp_path):
    path = naive_berlin_csv(tmp_path / "f.csv")
    inside = pd.Timestamp("2023-05-02 00:00", tz="UTC").timestamp()
    assert replayed_series(f"csv:{path}?tz=Europe/Berlin&replay=0", inside, inside + 3600).iloc[0] == 102
    with pytest.raises(ValueError, match="use replay=1"):
        replayed_series(f"csv:{path}?tz=Europe/Berlin&replay=0", START, START + 3600)


def test_synthetic_and_regions_still_work(carbon_regions):
    assert replayed_series("synthetic", START, START + 3600).notna().all()
    assert replayed_series(carbon_regions[0], START, START + 3600).notna().all()


@pytest.fixture
def carbon_regions() -> list[str]:
    from slurm_green.carbon.datasets import carbon_files

    regions = sorted(carbon_files())
    if not regions:
        pytest.skip("shared carbon data not found (set SLURM_GREEN_DATA)")
    return regions
