"""``whatif --sacct``: a site's own history, as sacct really prints it, replayed with a word on every assumption."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_green.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "slurm" / "fixtures"
HEADER = "JobID|JobName|Submit|Start|Elapsed|Timelimit|AllocTRES|Comment"


def history(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "history.txt"
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    return path


def whatif(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, ["whatif", "--carbon", "synthetic", *args])


def test_the_autumn_dst_night_a_bad_line_and_a_bad_number_are_warned_and_the_rest_replayed(tmp_path):
    path = history(tmp_path,
                   "1|train|2025-10-26T02:05:00|2025-10-26T02:06:00|01:00:00|02:00:00|gres/gpu=1|",
                   "2|train|2025-10-26T03:05:00|2025-10-26T03:06:00|01:00:00|02:00:00|gres/gpu=1|a|b|c",
                   "3|train|2025-10-26T04:05:00|2025-10-26T04:06:00|1:0x:00|02:00:00|gres/gpu=1|",
                   "4|train|2025-10-26T05:05:00|2025-10-26T05:06:00|02:00:00|04:00:00|gres/gpu=2|")
    result = whatif("--sacct", str(path), "--tz", "Europe/Berlin")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: history.txt: 1 submit time(s) in the hour a DST change repeats (read as the first, summer-time "
        "pass), 0 in the hour it skips (moved forward) in Europe/Berlin",
        "warning: history.txt: skipped 1 line(s), expected 8 fields ('|' inside a name or comment?): line 3 has 10",
        "warning: history.txt: skipped 1 line(s), Elapsed not a Slurm duration ([D-]HH:MM:SS): line 4 ('1:0x:00')",
    ]
    assert "what if: 2 GPU jobs from history.txt" in result.stdout
    assert "time limits: each job's own Timelimit from the history (2 of 2 jobs)" in result.stdout
    assert "forecast: perfect" in result.stdout


def test_an_unknown_time_zone_is_one_line(tmp_path):
    result = whatif("--sacct", str(history(tmp_path)), "--tz", "Mars/Olympus")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "Error: Invalid value for '--tz': 'Mars/Olympus' is not a time zone" in result.output


def test_only_the_needed_columns_are_asked_for(tmp_path):
    path = tmp_path / "minimal.txt"
    path.write_text("JobID|Submit|Start|Elapsed|ReqTRES\n7|2025-01-01T00:00:00|2025-01-01T00:01:00|01:00:00|gres/gpu=1\n")
    result = whatif("--sacct", str(path))
    assert result.exit_code == 0, result.output
    assert "time limits: no Timelimit in the history, runtime x 1.5 assumed" in result.stdout
    missing = tmp_path / "bad.txt"
    missing.write_text("JobID|JobName|Submit\n1|x|2025-01-01T00:00:00\n")
    refused = whatif("--sacct", str(missing))
    assert refused.exit_code == 2 and "missing Start, Elapsed, AllocTRES or ReqTRES" in refused.output


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_sacct_json_is_replayed_with_its_time_limits(tmp_path, version):
    capture = FIXTURES / version / "sacct.json"
    if not capture.exists():
        pytest.skip(f"no sacct --json capture for {version}")
    out = tmp_path / "whatif.json"
    result = whatif("--sacct", str(capture), "--json", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["policies"]["greenflow"]["finished"] == 4 and data["forecast"] == "perfect"
    assert data["time_limit_factor"] > 1.5  # the captured jobs were still running, far from their limits


def test_json_to_stdout_keeps_stdout_pure(tmp_path):
    capture = FIXTURES / "24.11" / "sacct.txt"
    if not capture.exists():
        pytest.skip("no 24.11 sacct capture")
    result = whatif("--sacct", str(capture), "--json", "-")
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)["policies"]) == {"fifo", "window", "window+cap", "window-aware", "zeus",
                                                          "greenflow", "powerflow", "eaco"}
    assert "what if:" in result.stderr and not (Path.cwd() / "-").exists()


def test_a_policy_that_slows_jobs_raises_their_limits_and_none_runs_past(tmp_path):
    """A decision that slows a job raises its time limit (``SetTimeLimit``, docs/enactment.md), in
    the replay as on Slurm: jobs that ran to their very limit, capped to 0.7 by the window policy,
    run longer and still within their limits (before the raise, 2 of the 3 ran past them)."""
    path = history(tmp_path,
                   "1|resnet50|2025-01-01T00:00:00|2025-01-01T00:00:00|02:00:00|02:00:00|gres/gpu=1|",
                   "2|resnet50|2025-01-01T00:10:00|2025-01-01T00:10:00|02:00:00|04:00:00|gres/gpu=1|",
                   "3|bert|2025-01-01T00:20:00|2025-01-01T00:20:00|03:00:00|03:00:00|gres/gpu=2|")
    out = tmp_path / "whatif.json"
    result = whatif("--sacct", str(path), "--json", str(out))
    assert result.exit_code == 0, result.output
    runs = json.loads(out.read_text())["policies"]
    assert runs["window+cap"]["energy_kwh"] < runs["fifo"]["energy_kwh"]  # the caps took
    assert {name: s["past_limit"] for name, s in runs.items()} == dict.fromkeys(runs, 0)
    assert "jobs past their time limit (live Slurm stops a job there" in result.stdout.replace("\n", " ")
