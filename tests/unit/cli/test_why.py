"""``slurm-green why JOBID``: Slurm's view of the job (a real ``squeue --json`` record, captured
from 24.11, served by a stand-in ``squeue`` on PATH), the controller's store read-only, and the
carbon now and at the decided start from a carbon file."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time

from cli_setup import carbon_csv, fake_squeue, slurm_time, write_config
from click.testing import CliRunner

from slurm_green.cli import main
from slurm_green.controller.store import StateStore
from slurm_green.core import decision_token
from slurm_green.core.actions import ActionError, ActionResult, SetDecision
from slurm_green.core.cluster import Job, JobState
from slurm_green.core.plan import JobDecision
from slurm_green.core.progress import JobProgress
from slurm_green.models import default_registry

NOW = time.time()
KEY = b"k" * 32


def site(tmp_path, *, refused: bool = False):
    """Job 42 of alice, managed, deferred 3 h to the low hours; the store decided a 70% cap."""
    config = write_config(tmp_path, sources=f'["csv:{carbon_csv(tmp_path, NOW, 3, 6)}"]')
    store = StateStore(tmp_path / "state.db")
    start = (NOW // 3600 + 3) * 3600
    store.record_decisions(NOW - 60, [JobDecision(42, start_at=start, power_cap_fraction=0.7, gpus_per_node=2,
                                                  num_nodes=1, reason="deferred 2.9 h to a 60 g/kWh window",
                                                  expected_runtime_s=3600, expected_carbon_kg=0.05,
                                                  carbon_if_now_kg=0.4, gpu_type="h100")])
    token = decision_token.sign(KEY, 42, {"cap": 0.7})
    action = SetDecision(42, token)
    ids = store.record_intents(NOW - 60, [action])
    store.record_outcomes(ids, [ActionResult(action, ActionError.PERMISSION_DENIED, "Invalid user id") if refused
                                else ActionResult(action)])
    store.observe_jobs(NOW - 60, [])
    store.close()
    env = fake_squeue(tmp_path, [{
        "job_id": 42, "user_name": "alice", "name": "resnet50", "job_state": ["PENDING"],
        "comment": f"my run {token}",
        "admin_comment": f"sg:managed=1;flex=21600;cap=1;share=0;deadline={int(NOW + 6 * 3600)};limit=3600",
        "time_limit": {"set": True, "infinite": False, "number": 84},  # minutes: raised for the 70 % cap
        "eligible_time": slurm_time(start), "submit_time": slurm_time(NOW - 120), "start_time": slurm_time(start),
        "tres_per_node": "gres/gpu:2"}, {
        "job_id": 7, "user_name": "bob", "job_state": ["PENDING"], "admin_comment": "", "comment": ""}])
    return config, env, start


def test_why_shows_start_deadline_gpus_cap_carbon_and_reason(tmp_path):
    config, env, start = site(tmp_path)
    before = sorted(os.listdir(tmp_path))
    result = CliRunner().invoke(main, ["why", "42", "--config", str(config)], env=env)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "job 42 (alice, resnet50): PENDING, managed by slurm-green, may wait 6.0 h" in out
    assert "decided start:" in out and re.search(r"\(in (2\.\d|3\.0)", out)  # 2-3 h ahead, by the minute
    assert "GPUs:           2 (1 node(s) x 2), planned as h100" in out
    assert "power cap:      70% enacted (decided: 70%)" in out
    assert "time limit:     1:24 h (submitted with 1:00 h; raised for the slower configuration decided)" in out
    assert "60 gCO2eq/kWh at the decided start vs 450 now (87% less" in out
    assert "reason:         deferred 2.9 h to a 60 g/kWh window" in out
    # read-only: no carbon cache, no new store; SQLite's own -shm/-wal of the WAL-mode store aside
    assert {name for name in os.listdir(tmp_path) if not name.startswith("state.db-")} == set(before)


def test_why_json_carries_the_same_and_a_refused_cap_is_not_claimed(tmp_path):
    config, env, start = site(tmp_path, refused=True)
    result = CliRunner().invoke(main, ["why", "42", "--json", "--config", str(config)], env=env)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["cap_enacted"] is None and out["cap_decided"] == 0.7 and out["gpu_type"] == "h100"
    assert out["now_g_per_kwh"] == 450.0 and out["at_start_g_per_kwh"] == 60.0
    assert out["decided_start"].endswith("+00:00") and out["token_in_comment"] is True
    assert (out["time_limit_s"], out["time_limit_submitted_s"]) == (84 * 60.0, 3600.0)


def test_why_shows_the_rates_the_jobs_own_reports_gave_and_an_older_store_still_reads(tmp_path):
    config, env, _ = site(tmp_path)
    store = StateStore(tmp_path / "state.db")
    store.record_rates([(42, gpus, JobProgress(42, "samples", 0.0, per_s, 0.0, NOW - 60 + i))
                        for i, (gpus, per_s) in enumerate(((1, 30.0), (1, 34.0), (2, 60.0)))])
    store.close()
    result = CliRunner().invoke(main, ["why", "42", "--config", str(config)], env=env)
    assert "measured:       32 samples/s on 1 GPU(s) (2 report(s)), 60 samples/s on 2 GPU(s) (1 report(s))" \
        in result.output, result.output
    with sqlite3.connect(tmp_path / "state.db") as db:  # as an older controller wrote it
        db.execute("DROP TABLE rates")
    result = CliRunner().invoke(main, ["why", "42", "--json", "--config", str(config)], env=env)
    assert result.exit_code == 0 and json.loads(result.output)["measured"] == [], result.output
    assert json.loads(result.output)["cap_decided"] == 0.7


def test_an_unmanaged_job_says_so(tmp_path):
    config, env, _ = site(tmp_path)
    result = CliRunner().invoke(main, ["why", "7", "--config", str(config)], env=env)
    assert result.exit_code == 0, result.output
    assert "job 7 (bob" in result.output and "not managed by slurm-green" in result.output


def test_a_job_slurm_does_not_show_is_one_line_exit_1(tmp_path):
    config, env, _ = site(tmp_path)
    result = CliRunner().invoke(main, ["why", "999", "--config", str(config)], env=env)
    assert result.exit_code == 1
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert "job 999: Slurm does not show it" in line and "sacct -j" in line


def test_without_the_store_it_shows_slurms_view_and_says_why(tmp_path):
    config, env, _ = site(tmp_path)
    (tmp_path / "state.db").unlink()
    result = CliRunner().invoke(main, ["why", "42", "--config", str(config)], env=env)
    assert result.exit_code == 0, result.output
    assert "Slurm's start:" in result.output and "note: controller's store not readable here (no state store" in result.output
    assert not (tmp_path / "state.db").exists()


def test_local_time_shows_the_machines_zone(tmp_path, monkeypatch):
    config, env, _ = site(tmp_path)
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        result = CliRunner().invoke(main, ["why", "42", "--local-time", "--config", str(config)], env=env)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert result.exit_code == 0, result.output
    assert " JST (in " in result.output and " UTC" not in result.output.split("carbon:")[0]


def test_an_ended_job_is_shown_by_the_callers_uid_not_by_user_in_the_environment(tmp_path, monkeypatch):
    """`USER=alice slurm-green why 42` run by another user must not show alice's ended job."""
    config = write_config(tmp_path, sources="[]")
    store = StateStore(tmp_path / "state.db")
    store.record_decisions(NOW - 600, [JobDecision(42, start_at=NOW - 300, gpus_per_node=2, num_nodes=1,
                                                   reason="alice's window", expected_runtime_s=60)])
    store.observe_jobs(NOW - 600, [Job(42, name="alice-secret-model", user="alice", state=JobState.PENDING,
                                       submit_time=NOW - 900)])
    store.close()
    env = fake_squeue(tmp_path, [])  # Slurm no longer shows job 42
    monkeypatch.setattr(os, "geteuid", lambda: 65534)  # nobody: neither root nor alice
    result = CliRunner().invoke(main, ["why", "42", "--config", str(config)],
                                env={**env, "USER": "alice", "LOGNAME": "alice"})
    assert result.exit_code == 1 and "alice-secret-model" not in result.output, result.output


def test_a_job_name_cannot_forge_lines_or_reach_the_terminal(tmp_path):
    """The name and the stored reason are untrusted: each stays on its own line, its controls escaped."""
    evil = "resnet\npower cap:      none enacted FORGED\x1b]0;owned\x07\x1b[2J"
    config = write_config(tmp_path, sources="[]")
    store = StateStore(tmp_path / "state.db")
    store.record_decisions(NOW - 60, [JobDecision(42, start_at=NOW + 3600, gpus_per_node=2, num_nodes=1,
                                                  reason="deferred\nnote: FORGED", expected_runtime_s=3600)])
    store.close()
    env = fake_squeue(tmp_path, [{
        "job_id": 42, "user_name": "alice", "name": evil, "job_state": ["PENDING"], "comment": "",
        "admin_comment": f"sg:managed=1;flex=21600;cap=1;share=0;deadline={int(NOW + 6 * 3600)};limit=3600",
        "eligible_time": slurm_time(NOW + 3600), "submit_time": slurm_time(NOW - 120),
        "start_time": slurm_time(NOW + 3600), "tres_per_node": "gres/gpu:2"}])
    result = CliRunner().invoke(main, ["why", "42", "--config", str(config)], env=env)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len([line for line in lines if line.startswith("power cap:")]) == 1, lines
    assert not [line for line in lines if line.startswith("note: FORGED")], lines
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert lines[0].startswith("job 42 (alice, resnet\\npower cap:      none enacted FORGED"
                               "\\x1b]0;owned\\x07\\x1b[2J): ")
    assert "reason:         deferred\\nnote: FORGED" in result.output
    as_json = CliRunner().invoke(main, ["why", "42", "--json", "--config", str(config)], env=env)
    assert json.loads(as_json.output)["name"] == evil  # --json carries it as it is (JSON escapes it)


def model_site(tmp_path, name: str, gpu_type: str | None = None):
    """Job 42 named ``name``, its decision stamped as the controller stamps it (the packaged models)."""
    models = default_registry()
    config = write_config(tmp_path, sources="[]")
    store = StateStore(tmp_path / "state.db")
    store.record_decisions(NOW - 60, [JobDecision(42, start_at=NOW + 3600, gpus_per_node=1, num_nodes=1,
                                                  reason="deferred", expected_runtime_s=3600, gpu_type=gpu_type,
                                                  model_params=models.params_id,
                                                  model_assumed=models.assumed(name, gpu_type))])
    store.close()
    env = fake_squeue(tmp_path, [{
        "job_id": 42, "user_name": "alice", "name": name, "job_state": ["PENDING"], "comment": "",
        "admin_comment": f"sg:managed=1;flex=21600;cap=1;share=0;deadline={int(NOW + 6 * 3600)};limit=3600",
        "eligible_time": slurm_time(NOW + 3600), "submit_time": slurm_time(NOW - 120),
        "start_time": slurm_time(NOW + 3600), "tres_per_node": "gres/gpu:1"}])
    return config, env, models.params_id


def test_why_says_when_the_jobs_model_was_assumed_and_why(tmp_path):
    config, env, params_id = model_site(tmp_path, "my-experiment", "NVIDIA H200")
    result = CliRunner().invoke(main, ["why", "42", "--config", str(config)], env=env)
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("model:")]
    assert line.startswith("model:          assumed (job name 'my-experiment' matches no modelled job type: "
                           "the conservative default model (")
    assert "; GPU type h200: not profiled" in line and line.endswith(f"; parameters {params_id})")
    as_json = json.loads(CliRunner().invoke(main, ["why", "42", "--json", "--config", str(config)], env=env).output)
    assert as_json["model_assumed"].startswith("job name 'my-experiment'") and as_json["model_params"] == params_id


def test_why_says_a_recognised_jobs_model_was_fitted_and_an_older_decision_says_nothing(tmp_path):
    config, env, params_id = model_site(tmp_path, "train_resnet50_bs64")
    result = CliRunner().invoke(main, ["why", "42", "--config", str(config)], env=env)
    assert f"model:          fitted for its job type and GPU type (parameters {params_id})" in result.output
    (tmp_path / "old").mkdir()
    old_config, old_env, _ = site(tmp_path / "old")  # a decision stored without the record
    assert "model:" not in CliRunner().invoke(main, ["why", "42", "--config", str(old_config)], env=old_env).output


def test_a_job_name_quoted_in_the_model_line_cannot_forge_lines_or_reach_the_terminal(tmp_path):
    evil = "run\nreason:         FORGED\x1b]0;owned\x07"
    config, env, _ = model_site(tmp_path, evil)
    result = CliRunner().invoke(main, ["why", "42", "--config", str(config)], env=env)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    [reason] = [line for line in result.output.splitlines() if line.startswith("reason:")]
    assert reason.startswith("reason:         deferred (decided ")
    assert "model:          assumed (job name 'run\\nreason:         FORGED\\x1b]0;owned\\x07' matches no" \
        in result.output
