"""prolog/prolog.sh and prolog/epilog.sh: bounded, logged, and exit 0 whatever Python does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HOOKS = [REPO / "prolog" / "prolog.sh", REPO / "prolog" / "epilog.sh"]


def run(script: Path, env: dict[str, str], timeout: float = 30) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - started


def fake_python(tmp_path: Path, body: str) -> dict[str, str]:
    """A PATH whose ``python3`` is a script of ours: the PATH trick."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / "python3").chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


@pytest.fixture
def base_env(tmp_path) -> dict[str, str]:
    return {"SLURM_JOB_ID": "77", "SLURM_JOB_GPUS": "0", "SLURM_GREEN_LOG": str(tmp_path / "log" / "hooks.log")}


@pytest.mark.parametrize("script", HOOKS, ids=lambda p: p.name)
def test_hooks_are_executable(script: Path) -> None:
    assert os.access(script, os.X_OK)


@pytest.mark.parametrize("script", HOOKS, ids=lambda p: p.name)
def test_failing_python_still_exits_0_and_is_logged(tmp_path, base_env, script: Path) -> None:
    env = {**base_env, **fake_python(tmp_path, "echo 'Traceback: boom' >&2; exit 3")}
    done, _ = run(script, env)
    assert done.returncode == 0
    log = Path(base_env["SLURM_GREEN_LOG"]).read_text()
    assert "Traceback: boom" in log and "exited with status 3" in log and "job=77" in log


@pytest.mark.parametrize("script", HOOKS, ids=lambda p: p.name)
def test_hanging_python_is_killed_and_still_exits_0(tmp_path, base_env, script: Path) -> None:
    env = {**base_env, **fake_python(tmp_path, "trap '' TERM; sleep 60"), "SLURM_GREEN_HOOK_TIMEOUT": "1"}
    done, seconds = run(script, env)
    assert done.returncode == 0
    assert seconds < 10  # 1 s, then KILL 2 s later
    assert "timed out after 1s" in Path(base_env["SLURM_GREEN_LOG"]).read_text()


def test_missing_interpreter_or_module_still_exits_0(tmp_path, base_env) -> None:
    env = {**base_env, "PATH": "/usr/bin:/bin", "SLURM_GREEN_PYTHON": str(tmp_path / "no-such-python")}
    assert run(HOOKS[0], env)[0].returncode == 0
    env = {**base_env, "PATH": "/usr/bin:/bin", "SLURM_GREEN_PYTHON": sys.executable,
           "SLURM_GREEN_HOME": str(tmp_path / "empty")}
    assert run(HOOKS[0], {**env, "PYTHONNOUSERSITE": "1"})[0].returncode == 0


def test_unwritable_log_still_exits_0(tmp_path, base_env) -> None:
    env = {**base_env, **fake_python(tmp_path, "exit 1"), "SLURM_GREEN_LOG": "/proc/no/such/hooks.log"}
    assert run(HOOKS[0], env)[0].returncode == 0


def test_real_run_through_the_wrappers(tmp_path, base_env) -> None:
    state = tmp_path / "state"
    env = {
        **base_env,
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "SLURM_GREEN_HOME": str(REPO),
        "SLURM_GREEN_GPU_CONF": str(tmp_path / "absent.conf"),
        "SLURM_GREEN_GPU_BACKEND": "emulated",
        "SLURM_GREEN_GPU_EMULATED_STATE": str(state / "gpus.json"),
        "SLURM_GREEN_STATE_DIR": str(state),
        "SLURM_GREEN_DEFAULT_CAP": "0.75",
        "SLURM_JOB_GPUS": "2",
    }
    assert run(HOOKS[0], env)[0].returncode == 0
    assert json.loads((state / "gpus.json").read_text())["devices"]["2"]["current_w"] == 300
    assert run(HOOKS[1], env)[0].returncode == 0
    assert json.loads((state / "gpus.json").read_text())["devices"]["2"]["current_w"] == 400
    log = Path(base_env["SLURM_GREEN_LOG"]).read_text()
    assert "prolog job=77: gpu 2: 400 W -> 300 W" in log and "epilog job=77: gpu 2: 300 W -> 400 W" in log
