"""The ``carbon`` CLI group: show (table, JSON, PNG) and check."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from slurm_green.cli.carbon import carbon


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_show_json_is_labelled_synthetic_with_windows(runner):
    result = runner.invoke(carbon, ["show", "--source", "synthetic", "--json", "--hours", "48", "--at", "2025-03-03T00:00Z"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["source"] == "synthetic" and data["synthetic"] is True and data["unit"] == "gCO2eq/kWh"
    assert len(data["points"]) == 48
    starts = [w["start"] for w in data["low_carbon_windows"]]
    assert starts and all("T1" in s or "T09" in s for s in starts)  # midday dips


def test_show_table_and_plot(runner, tmp_path):
    png = tmp_path / "ci.png"
    result = runner.invoke(carbon, ["show", "--hours", "12", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert "SYNTHETIC" in result.output and "gCO2eq/kWh" in result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_show_reports_skipped_sources_and_total_failure(runner):
    result = runner.invoke(carbon, ["show", "--source", "ukgrid?base_url=http://127.0.0.1:9,synthetic", "--hours", "3"])
    assert result.exit_code == 0 and "skipped ukgrid" in result.output
    failed = runner.invoke(carbon, ["show", "--source", "ukgrid?base_url=http://127.0.0.1:9"])
    assert failed.exit_code == 1 and "every carbon source failed" not in failed.output  # single source: its own error
    assert "connection failed" in failed.output


def test_check_lists_each_source_and_fails_when_none_answers(runner, carbon_csvs):
    ok = runner.invoke(carbon, ["check", "--source", f"synthetic,csv:{carbon_csvs['GB']}?replay=1"])
    assert ok.exit_code == 0 and ok.output.count("OK") == 2
    bad = runner.invoke(carbon, ["check", "--source", "electricitymaps:DE"], env={"ELECTRICITYMAPS_TOKEN": ""})
    assert bad.exit_code == 1 and "FAIL" in bad.output


def gappy_csv(tmp_path) -> str:
    """Two weeks of hourly data with six hours missing on 2023-05-05."""
    stamps = pd.date_range("2023-05-01T00:00Z", periods=24 * 14, freq="h")
    rows = [f"{t.isoformat()},{300 + t.hour}" for i, t in enumerate(stamps) if not 100 <= i < 106]
    path = tmp_path / "gappy.csv"
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    return str(path)


def test_check_fails_on_a_six_hour_gap_and_says_where(runner, tmp_path):
    result = runner.invoke(carbon, ["check", "--source", f"csv:{gappy_csv(tmp_path)}?replay=1"], env={"COLUMNS": "1000"})
    assert result.exit_code == 1
    assert "FAIL" in result.output and "GapError" in result.output
    assert "1 gap(s) longer than" in result.output and "6 point(s) missing from 2023-05-05 04:00" in result.output


def test_show_on_a_gappy_file_falls_through_to_the_next_source_and_says_why(runner, tmp_path):
    result = runner.invoke(carbon, ["show", "--source", f"csv:{gappy_csv(tmp_path)}?replay=1,synthetic", "--hours", "3"],
                           env={"COLUMNS": "1000"})
    assert result.exit_code == 0, result.output
    assert "skipped csv:" in result.output and "GapError" in result.output and "SYNTHETIC" in result.output
