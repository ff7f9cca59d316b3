"""``carbon check --config`` checks what the controller would use; ``carbon show --hours N`` shows N hours."""

from __future__ import annotations

import json

import pytest
from cli_setup import DEAD_SOURCE, write_config
from click.testing import CliRunner

from slurm_green.carbon.datasets import carbon_files
from slurm_green.cli import main

#: Wide enough that no table cell wraps, so each row is one line to assert on.
WIDE = {"COLUMNS": "400"}


def test_check_reads_the_sources_the_config_names(tmp_path):
    regions = carbon_files()
    if "GB" not in regions:
        pytest.skip("shared carbon data not found (SLURM_GREEN_DATA)")
    config = write_config(tmp_path, sources=f'["csv:{regions["GB"]}?replay=1", "{DEAD_SOURCE}"]')
    result = CliRunner().invoke(main, ["carbon", "check", "--config", str(config)], env=WIDE)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "csv:" in line]
    assert len(rows) == 2 and "OK" in rows[0] and "em_GB_2023_hourly.csv" in rows[0]
    assert "FAIL" in rows[1] and "/nonexistent/carbon.csv" in rows[1]
    assert "synthetic" not in result.output


def test_check_with_every_configured_source_failing_exits_1(tmp_path):
    result = CliRunner().invoke(main, ["carbon", "check", "--config", str(write_config(tmp_path))], env=WIDE)
    assert result.exit_code == 1 and "FAIL" in result.output


def test_check_without_a_config_says_nothing_is_configured(tmp_path):
    result = CliRunner().invoke(main, ["carbon", "check", "--config", str(tmp_path / "absent.toml")])
    assert result.exit_code == 1
    assert result.output.strip() == (f"Error: nothing configured: {tmp_path / 'absent.toml'} does not exist; "
                                     "give --config FILE or --source SPEC")


def test_check_of_a_config_without_sources_says_so(tmp_path):
    config = write_config(tmp_path, sources="[]")
    result = CliRunner().invoke(main, ["carbon", "check", "--config", str(config)])
    assert result.exit_code == 1
    assert "nothing configured" in result.output and "sets no [carbon] sources" in result.output
    assert "synthetic" not in result.output


def test_an_explicit_source_needs_no_config(tmp_path):
    result = CliRunner().invoke(main, ["carbon", "check", "--source", DEAD_SOURCE,
                                       "--config", str(tmp_path / "absent.toml")], env=WIDE)
    assert result.exit_code == 1 and "FAIL" in result.output and "nothing configured" not in result.output


@pytest.mark.parametrize("at", ["2025-03-03T00:00Z", "2025-03-03T00:30Z"])
def test_show_hours_4_is_4_hourly_points_from_the_hour_holding_now(at):
    result = CliRunner().invoke(main, ["carbon", "show", "--source", "synthetic", "--hours", "4", "--json", "--at", at])
    assert result.exit_code == 0, result.output
    times = [point["time"] for point in json.loads(result.output)["points"]]
    assert times == [f"2025-03-03T0{h}:00:00+00:00" for h in range(4)]


def test_show_table_has_one_row_per_hour():
    result = CliRunner().invoke(main, ["carbon", "show", "--source", "synthetic", "--hours", "4",
                                       "--at", "2025-03-03T00:00Z"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert sum(" 2025-03-03 0" in line for line in result.output.splitlines()) == 4


def test_a_failing_sources_spec_and_error_are_shown_as_written(tmp_path):
    """A path or a provider's answer holding "[/...]" was rich markup: MarkupError, exit 70."""
    spec = f"csv:{tmp_path}/[/x]/[jdoe]\x1b[2J.csv"
    result = CliRunner().invoke(main, ["carbon", "check", "--source", spec], env=WIDE)
    assert result.exit_code == 1, result.output
    [row] = [line for line in result.output.splitlines() if "FAIL" in line]
    assert row.count("/[/x]/[jdoe]\\x1b[2J.csv") == 2 and "\x1b" not in result.output, row


@pytest.mark.parametrize("at, said", [("", "'' is not a time"), ("NaT", "'NaT' is not a time"),
                                      ("3000-01-01", "more than 100 years from now"),
                                      ("1677-09-21T00:13Z", "more than 100 years from now")])
def test_show_at_that_is_no_usable_time_is_a_usage_error(at, said):
    """pandas reads "" (an empty shell variable) as NaT, and 3000-01-01 overflowed later: both were exit 70."""
    result = CliRunner().invoke(main, ["carbon", "show", "--source", "synthetic", "--at", at])
    assert result.exit_code == 2 and "Invalid value for --at" in result.output and said in result.output, result.output
