"""``slurm-green when``: the lowest-carbon start before a deadline, for ``sbatch --begin``,
from a real carbon file read through the configured sources; it writes nothing."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from types import SimpleNamespace

import pytest
from cli_setup import carbon_csv, write_config
from click.testing import CliRunner

from slurm_green.cli import main
from slurm_green.cli import when as when_command

NOW = time.time()
HOUR = int(NOW // 3600 * 3600)


@pytest.fixture(autouse=True)
def frozen_now(monkeypatch):
    """The command reads the clock once; pinned to the NOW the carbon file was written
    around, so a run that crosses an hour boundary still finds the low hours where they are."""
    monkeypatch.setattr(when_command, "time", SimpleNamespace(time=lambda: NOW))


def when(tmp_path, *args: str, low=(3, 6)):
    config = write_config(tmp_path, sources=f'["csv:{carbon_csv(tmp_path, NOW, *low)}"]')
    return CliRunner().invoke(main, ["when", "--config", str(config), *args])


def test_the_low_hours_are_found_and_printed_for_sbatch_begin(tmp_path):
    result = when(tmp_path, "--duration", "2h", "--deadline", "12h")
    assert result.exit_code == 0, result.output
    begin = dt.datetime.fromtimestamp(HOUR + 3 * 3600).strftime("%Y-%m-%dT%H:%M:%S")  # sbatch reads local time
    assert f"sbatch --begin={begin} ..." in result.output
    assert "carbon: 60 gCO2eq/kWh then vs 450 now (87% less)" in result.output
    assert sorted(os.listdir(tmp_path)) == ["carbon.csv", "config.toml"]  # no carbon cache written


def test_json_and_a_deadline_before_the_low_hours(tmp_path):
    result = when(tmp_path, "--duration", "1h", "--deadline", "2h", "--json", low=(5, 8))
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["then_g_per_kwh"] == 450.0 and out["begin"] == "now" and out["saving_fraction"] == 0.0
    late = when(tmp_path, "--duration", "1h", "--deadline",
                dt.datetime.fromtimestamp(HOUR + 6 * 3600, dt.timezone.utc).isoformat(), "--json", low=(5, 8))
    out = json.loads(late.output)
    assert out["start_epoch"] == HOUR + 5 * 3600 and out["then_g_per_kwh"] == 60.0


def test_a_deadline_past_the_forecast_is_cut_and_said(tmp_path):
    result = when(tmp_path, "--duration", "3h", "--deadline", "3d", low=(40, 48))
    assert result.exit_code == 0, result.output
    assert "note: the forecast ends" in result.output


def test_bad_values_are_one_line_exit_2(tmp_path):
    for args, words in ((["--duration", "0"], "must be more than 0"), (["--duration", "x"], "--duration"),
                        (["--duration", "1h", "--deadline", "yesterday"], "neither a duration"),
                        (["--duration", "99999999999d"], "at most 366d"),  # overflowed the calendar: exit 70
                        (["--duration", "1h", "--deadline", "400d"], "at most 366 days ahead"),
                        (["--duration", "1h", "--deadline", "99999999999d"], "more than 100 years from now")):
        result = when(tmp_path, *args)
        assert result.exit_code == 2 and words in result.output and "Traceback" not in result.output


def test_no_configured_source_says_so(tmp_path):
    config = write_config(tmp_path, sources="[]")
    result = CliRunner().invoke(main, ["when", "--duration", "1h", "--config", str(config)])
    assert result.exit_code == 1
    assert "Error: no carbon source: the configuration sets no [carbon] sources" in result.output
