"""``slurm-green budget``: each period's limit against what a real store accounted, as a
table and JSON; without a [budget] limit, one line and exit 1."""

from __future__ import annotations

import json
import time
from zoneinfo import ZoneInfo

from cli_setup import write_config
from click.testing import CliRunner

from slurm_green.cli import main
from slurm_green.controller.budget import period_bounds
from slurm_green.controller.store import StateStore
from slurm_green.core.cluster import Job, JobState
from slurm_green.core.plan import JobDecision

BUDGET = '[policy]\nname = "powerflow"\n[budget]\nenergy_kwh = 3\n'


def ran(store: StateStore, job_id: int, start: float, hours: float) -> None:
    """A 1 kW job that ran ``hours`` from ``start``, accounted when it ended."""
    store.record_decisions(start, [JobDecision(job_id, start_at=start, expected_energy_kwh=hours,
                                               expected_runtime_s=hours * 3600)])
    job = Job(job_id, state=JobState.COMPLETED, start_time=start, end_time=start + hours * 3600)
    store.observe_jobs(start, [job])
    store.account_usage(start + hours * 3600, [job], None)


def test_periods_spent_against_the_limit(tmp_path):
    config = write_config(tmp_path, sources="[]", extra=BUDGET)
    today, _ = period_bounds(time.time(), "day", ZoneInfo("UTC"))
    store = StateStore(tmp_path / "state.db")
    ran(store, 1, today - 86400, 4.0)  # yesterday: 4 kWh of 3
    ran(store, 2, today, min(1.0, (time.time() - today) / 7200))  # today: well under (nothing just after midnight)
    store.close()
    result = CliRunner().invoke(main, ["budget", "--config", str(config), "--periods", "3", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["unit"] == "kWh" and [p["start"] for p in out["periods"]] == [today - 2 * 86400, today - 86400, today]
    assert [p["held"] for p in out["periods"]] == [True, False, True]
    assert out["periods"][1]["spent"] == 4.0 and out["periods"][1]["jobs"] == 1 and out["periods"][2]["current"]
    table = CliRunner().invoke(main, ["budget", "--config", str(config), "--periods", "3"])
    assert table.exit_code == 0 and "held in 1 of 2 ended period(s)" in table.output and "NO" in table.output


def test_no_budget_configured_is_one_line(tmp_path):
    config = write_config(tmp_path, sources="[]")
    result = CliRunner().invoke(main, ["budget", "--config", str(config)])
    assert result.exit_code == 1 and "no [budget] limit" in result.output and "Traceback" not in result.output
