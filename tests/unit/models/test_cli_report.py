"""``slurm-green models report`` (kept with the models tests: the CLI module is this area's)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from slurm_green.cli import main


def test_report_json_lists_every_source_and_the_cap_finding(perf) -> None:
    result = CliRunner().invoke(main, ["models", "report", "--json", "--data-dir", str(perf.parent)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert {p["source"] for p in report["pooled"]} == {"gavel", "pollux", "zeus"}
    assert {"measured_all_sweeps", "measured_cap_bound", "model_cap_bound"} <= set(report["energy_optimal_cap"]["all"])


def test_report_table_and_missing_data(perf, tmp_path) -> None:
    result = CliRunner().invoke(main, ["models", "report", "--data-dir", str(perf.parent)])
    assert result.exit_code == 0 and "Held-out error" in result.output
    missing = CliRunner().invoke(main, ["models", "report", "--data-dir", str(tmp_path)])
    assert missing.exit_code != 0 and "no profile data" in missing.output
