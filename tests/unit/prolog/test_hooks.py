"""prolog.main and epilog.main on a node in a temp dir: emulated GPUs and fake NVML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_green.core import decision_token, telemetry
from slurm_green.gpu import epilog, prolog


def limits_w(env: dict[str, str]) -> dict[int, float]:
    devices = json.loads(open(env["SLURM_GREEN_GPU_EMULATED_STATE"]).read())["devices"]
    return {int(minor): d["current_w"] for minor, d in devices.items()}


def with_token(env: dict[str, str], job_id: int = 42, **payload) -> dict[str, str]:
    """The comment after the controller signed its decision with the site key."""
    key = Path(env["SLURM_GREEN_DECISION_KEY"]).read_bytes().strip()
    return {**env, "SLURM_JOB_COMMENT": f"green:flex=2h {decision_token.sign(key, job_id, payload)}"}


def jobs_dir(env: dict[str, str]) -> Path:
    return Path(env["SLURM_GREEN_STATE_DIR"]) / "jobs"


def test_valid_token_caps_exactly_the_jobs_gpus_and_epilog_restores(node_env, no_nvml, capsys) -> None:
    env = with_token(node_env, cap=0.7)
    assert prolog.main(env) == 0
    assert limits_w(env) == {1: 280, 3: 280}  # only minors 1 and 3 were touched
    assert "job=42: gpu 1: 400 W -> 280 W" in capsys.readouterr().err
    assert epilog.main(env) == 0
    assert limits_w(env) == {1: 400, 3: 400}
    assert "gpu 3: 280 W -> 400 W (restored)" in capsys.readouterr().err
    assert list(jobs_dir(env).glob("*.json")) == []


def test_fake_nvml_maps_slurm_ids_by_minor_number(node_env, fake_gpus) -> None:
    env = with_token(node_env, cap=0.5)
    env.pop("SLURM_GREEN_GPU_EMULATED_STATE")
    assert prolog.main(env) == 0
    assert fake_gpus[1].limit_mw == 125_000  # 0.5 x 250 W
    assert fake_gpus[3].limit_mw == 250_000  # 0.5 x 500 W
    assert fake_gpus[0].set_calls == [] and fake_gpus[2].set_calls == []
    assert epilog.main(env) == 0
    assert (fake_gpus[1].limit_mw, fake_gpus[3].limit_mw) == (250_000, 450_000)


@pytest.mark.parametrize(
    "forge",
    [
        lambda env: decision_token.sign(b"forged-key-of-sufficient-length!", 42, {"cap": 0.3}),
        lambda env: with_token(env, job_id=41, cap=0.3)["SLURM_JOB_COMMENT"],  # signed, for another job
        lambda env: "sg1.eyJjYXAiOjAuM30." + "0" * 64,
    ],
)
def test_forged_tokens_are_ignored(node_env, no_nvml, capsys, forge) -> None:
    env = {**node_env, "SLURM_JOB_COMMENT": forge(node_env), "SLURM_GREEN_DEFAULT_CAP": "0.9"}
    assert prolog.main(env) == 0
    assert limits_w(env) == {1: 360, 3: 360}  # the site default, not 0.3
    assert "decision token ignored" in capsys.readouterr().err


def test_no_token_and_no_default_leaves_limits(node_env, no_nvml) -> None:
    assert prolog.main(node_env) == 0
    assert limits_w(node_env) == {1: 400, 3: 400}


def test_gpu_error_still_exits_0_and_logs(node_env, fake_gpus, capsys) -> None:
    env = with_token(node_env, cap=0.5)
    env.pop("SLURM_GREEN_GPU_EMULATED_STATE")
    fake_gpus[1].fail_set = True
    assert prolog.main(env) == 0
    err = capsys.readouterr().err
    assert "gpu 1: error" in err and "Insufficient Permissions" in err
    assert fake_gpus[3].limit_mw == 250_000
    fake_gpus[3].fail_set = True
    assert epilog.main(env) == 0
    assert "gpu 3: error, could not set 450 W" in capsys.readouterr().err


@pytest.mark.parametrize(
    "change",
    [{"SLURM_JOB_ID": "not-a-number"}, {"SLURM_GREEN_GPU_BACKEND": "quantum"}, {"SLURM_JOB_GPUS": "0,x"}],
)
def test_bad_input_exits_0_and_says_why(node_env, no_nvml, capsys, change) -> None:
    assert prolog.main({**node_env, **change}) == 0
    assert "failed, GPUs left as they are" in capsys.readouterr().err


def test_gpu_freq_enactment_leaves_power_limits_alone(node_env, no_nvml, capsys) -> None:
    env = {**with_token(node_env, cap=0.5), "SLURM_GREEN_GPU_ENACTMENT": "gpu_freq"}
    assert prolog.main(env) == 0
    assert "gpu_freq" in capsys.readouterr().err
    assert not jobs_dir(env).exists()


def test_node_without_power_control_says_so(node_env, no_nvml, capsys) -> None:
    env = dict(node_env)
    env.pop("SLURM_GREEN_GPU_EMULATED_STATE")
    assert prolog.main(env) == 0
    assert "no GPU power control" in capsys.readouterr().err
    assert epilog.main(env) == 0  # nothing recorded: nothing to do


def test_jobs_without_gpus_cost_nothing(node_env, no_nvml, capsys) -> None:
    assert prolog.main({**node_env, "SLURM_JOB_GPUS": ""}) == 0
    assert capsys.readouterr().err == ""


def test_epilog_leaves_the_jobs_metered_energy_for_the_controller(node_env, fake_gpus, tmp_path) -> None:
    spool = tmp_path / "telemetry"
    env = {**with_token(node_env, cap=0.5), "SLURM_GREEN_TELEMETRY_DIR": str(spool), "SLURMD_NODENAME": "node7"}
    env.pop("SLURM_GREEN_GPU_EMULATED_STATE")
    fake_gpus[1].energy_mj, fake_gpus[3].energy_mj = 5_000_000, 7_000_000  # counters since boot
    assert prolog.main(env) == 0
    fake_gpus[1].energy_mj += 1_500_000  # the job drew 1,500 J and 500 J
    fake_gpus[3].energy_mj += 500_000
    assert epilog.main(env) == 0
    (path,) = spool.glob("*")
    record = telemetry.read(path)
    assert record.started_at is not None  # the run's start on this node (its Prolog): a name per run
    assert path.name == f"42.node7.{int(record.started_at)}.energy.json"
    assert (record.job_id, record.node, record.gpus, record.energy_j, record.shared) == (42, "node7", 2, 2000.0, False)
    assert 0 <= record.seconds < 60


def test_without_a_telemetry_dir_or_an_energy_reading_nothing_is_left(node_env, no_nvml, fake_gpus, tmp_path) -> None:
    env = with_token(node_env, cap=0.5)
    assert prolog.main(env) == 0 and epilog.main(env) == 0  # no SLURM_GREEN_TELEMETRY_DIR
    spool = tmp_path / "telemetry"
    env = {**env, "SLURM_GREEN_TELEMETRY_DIR": str(spool)}
    env.pop("SLURM_GREEN_GPU_EMULATED_STATE")
    assert prolog.main(env) == 0
    fake_gpus[3].fail_energy = True  # one counter unreadable at the end: no partial sum
    assert epilog.main(env) == 0
    assert not spool.exists() or list(spool.glob("*")) == []


@pytest.mark.parametrize(("array", "capped"), [(40, True), (41, False)])
def test_an_array_task_is_capped_by_its_arrays_decision(node_env, no_nvml, tmp_path, monkeypatch, array, capped) -> None:
    """slurmd gives a task its own SLURM_JOB_ID (42); the Comment it copied is signed for array 40;
    slurmctld (a fake scontrol) says which array job 42 belongs to."""
    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.parent.mkdir()
    scontrol.write_text(f"#!/bin/sh\necho 'JobId=42 ArrayJobId={array} ArrayTaskId=2 JobName=x'\n")
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{scontrol.parent}:/usr/bin:/bin")
    env = with_token(node_env, job_id=40, cap=0.7)
    assert prolog.main(env) == 0
    assert limits_w(env) == ({1: 280, 3: 280} if capped else {1: 400, 3: 400})
    assert epilog.main(env) == 0
    assert limits_w(env) == {1: 400, 3: 400}


def test_epilog_restores_when_the_jobs_record_was_lost(node_env, no_nvml, capsys) -> None:
    env = with_token(node_env, cap=0.7)
    assert prolog.main(env) == 0
    (jobs_dir(env) / "42.json").unlink()
    assert epilog.main(env) == 0
    assert limits_w(env) == {1: 400, 3: 400}
    assert "(restored: no job holds it)" in capsys.readouterr().err
