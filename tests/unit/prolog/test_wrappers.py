"""The Prolog/Epilog wrappers slurm.conf names: written by wrappers.install, self-contained,
bounded, logged, and exit 0 whatever happens around them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from slurm_green.gpu import wrappers
from slurm_green.gpu.wrappers import HookSettings

REPO = Path(__file__).resolve().parents[3]
# A node's plain interpreter: finds slurm_green only through SLURM_GREEN_HOME (the venv's
# editable install would hide a missing repository copy).
NODE_PYTHON = "/usr/bin/python3"


@pytest.fixture(autouse=True)
def _plain_python() -> None:
    done = subprocess.run([NODE_PYTHON, "-c", "import sys; assert sys.version_info >= (3, 10); import slurm_green"],
                          cwd="/", capture_output=True, env={"PYTHONNOUSERSITE": "1"})
    if done.returncode != 1 or b"No module named 'slurm_green'" not in done.stderr:
        pytest.skip(f"{NODE_PYTHON} must be Python >= 3.10 without slurm_green installed")


@pytest.fixture
def log_file(tmp_path) -> Path:
    return tmp_path / "log" / "hooks.log"


def install(tmp_path: Path, log_file: Path, **settings) -> dict[str, Path]:
    """The two wrappers, written into their own directory and nowhere near the repository."""
    fields = {"python": NODE_PYTHON, "home": str(REPO), "log": str(log_file), **settings}
    paths = wrappers.install(tmp_path / "libexec", HookSettings(**fields))
    return {p.name: p for p in paths}


def run(script: Path, env: dict[str, str], timeout: float = 30) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=timeout, cwd="/")
    return done, time.monotonic() - started


def fake_python(tmp_path: Path, body: str) -> str:
    path = tmp_path / "bin" / "python3"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def job_env() -> dict[str, str]:
    """What slurmd passes: the job's variables, and no PATH at all."""
    return {"SLURM_JOB_ID": "77", "SLURM_JOB_GPUS": "0"}


def test_install_writes_two_executable_self_contained_files(tmp_path, log_file) -> None:
    hooks = install(tmp_path, log_file, timeout_s=7)
    assert sorted(hooks) == ["epilog", "prolog"]
    for kind, path in hooks.items():
        text = path.read_text()
        assert os.access(path, os.X_OK) and text.startswith("#!/bin/sh\n")
        assert f"-m \"slurm_green.gpu.$kind\"" in text and f"kind={kind}" in text
        assert "@" not in text.replace("$@", "")  # every placeholder filled
        assert ". " not in [line.strip()[:2] for line in text.splitlines()]  # sources nothing
        assert f"SLURM_GREEN_HOOK_TIMEOUT:-7" in text
    assert not list((tmp_path / "libexec").glob(".*.tmp"))


@pytest.mark.parametrize("bad", [{"python": "python3"}, {"home": "opt/x"}, {"timeout_s": 0}, {"log": "x.log"}])
def test_settings_that_would_not_work_under_slurmd_are_refused(bad) -> None:
    with pytest.raises(ValueError):
        HookSettings(**bad)


def test_module_entry_point_writes_the_hooks_and_says_where(tmp_path) -> None:
    """As an admin runs it on a node: the repository copy and a plain python3, nothing else."""
    node = {"PYTHONPATH": str(REPO)}
    done = subprocess.run([NODE_PYTHON, "-m", "slurm_green.gpu.wrappers", str(tmp_path / "d"),
                           "--python", "/opt/venv/bin/python", "--home", ""], capture_output=True, text=True, env=node)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path / "d" / "prolog"), str(tmp_path / "d" / "epilog")]
    assert "SLURM_GREEN_HOME=${SLURM_GREEN_HOME-''}" in (tmp_path / "d" / "prolog").read_text()
    done = subprocess.run([NODE_PYTHON, "-m", "slurm_green.gpu.wrappers", str(tmp_path / "e"),
                           "--python", "python3"], capture_output=True, text=True, env=node)
    assert done.returncode == 1 and "absolute path" in done.stderr and not (tmp_path / "e").exists()


@pytest.mark.parametrize("kind", wrappers.KINDS)
def test_failing_python_still_exits_0_and_is_logged(tmp_path, log_file, job_env, kind) -> None:
    hooks = install(tmp_path, log_file, python=fake_python(tmp_path, "echo 'Traceback: boom' >&2; exit 3"))
    done, _ = run(hooks[kind], job_env)
    assert done.returncode == 0
    log = log_file.read_text()
    assert "Traceback: boom" in log and "exited with status 3" in log and f"{kind} job=77" in log


@pytest.mark.parametrize("kind", wrappers.KINDS)
def test_hanging_python_is_killed_and_still_exits_0(tmp_path, log_file, job_env, kind) -> None:
    hooks = install(tmp_path, log_file, python=fake_python(tmp_path, "trap '' TERM; sleep 60"), timeout_s=1)
    done, seconds = run(hooks[kind], job_env)
    assert done.returncode == 0
    assert seconds < 10  # 1 s, then KILL 2 s later
    assert "timed out after 1s" in log_file.read_text()


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"SLURM_GREEN_PYTHON": "/no/such/python3"}, "could not be started (status 127)"),
        ({"SLURM_GREEN_HOME": "/no/such/repository"}, "slurm_green is not importable by"),
    ],
    ids=["missing-interpreter", "missing-repository"],
)
def test_missing_interpreter_or_repository_still_exits_0_and_says_why(tmp_path, log_file, job_env, change, said) -> None:
    hooks = install(tmp_path, log_file)
    for kind in wrappers.KINDS:
        assert run(hooks[kind], {**job_env, **change})[0].returncode == 0
    assert log_file.read_text().count(said) == 2


def test_repository_moved_away_after_install_still_exits_0(tmp_path, log_file, job_env) -> None:
    """The wrapper needs nothing of the copy it was written from."""
    copy = tmp_path / "opt" / "slurm-green"
    shutil.copytree(REPO / "slurm_green", copy / "slurm_green", ignore=shutil.ignore_patterns("__pycache__"))
    hooks = install(tmp_path, log_file, home=str(copy))
    env = {**job_env, "SLURM_GREEN_GPU_BACKEND": "none"}
    assert run(hooks["prolog"], env)[0].returncode == 0
    assert "prolog job=77: GPU power control disabled" in log_file.read_text()  # the copy in place
    copy.rename(copy.with_name("slurm-green.off"))
    assert run(hooks["prolog"], env)[0].returncode == 0
    assert run(hooks["epilog"], env)[0].returncode == 0
    assert log_file.read_text().count("No module named 'slurm_green'") == 2


def test_unwritable_log_still_exits_0(tmp_path, job_env) -> None:
    hooks = install(tmp_path, Path("/proc/no/such/hooks.log"), python=fake_python(tmp_path, "exit 1"))
    assert run(hooks["prolog"], job_env)[0].returncode == 0


def test_a_bad_timeout_from_the_environment_falls_back_to_the_installed_one(tmp_path, log_file, job_env) -> None:
    hooks = install(tmp_path, log_file, python=fake_python(tmp_path, "trap '' TERM; sleep 60"), timeout_s=1)
    done, seconds = run(hooks["prolog"], {**job_env, "SLURM_GREEN_HOOK_TIMEOUT": "soon"})
    assert done.returncode == 0 and seconds < 10
    assert "timed out after 1s" in log_file.read_text()


def test_real_run_through_the_wrappers(tmp_path, log_file, job_env) -> None:
    hooks = install(tmp_path, log_file)
    state = tmp_path / "state"
    env = {
        **job_env,
        "SLURM_GREEN_GPU_CONF": str(tmp_path / "absent.conf"),
        "SLURM_GREEN_GPU_BACKEND": "emulated",
        "SLURM_GREEN_GPU_EMULATED_STATE": str(state / "gpus.json"),
        "SLURM_GREEN_STATE_DIR": str(state),
        "SLURM_GREEN_DEFAULT_CAP": "0.75",
        "SLURM_JOB_GPUS": "2",
    }
    assert run(hooks["prolog"], env)[0].returncode == 0
    assert json.loads((state / "gpus.json").read_text())["devices"]["2"]["current_w"] == 300
    assert run(hooks["epilog"], env)[0].returncode == 0
    assert json.loads((state / "gpus.json").read_text())["devices"]["2"]["current_w"] == 400
    log = log_file.read_text()
    assert "prolog job=77: gpu 2: 400 W -> 300 W" in log and "epilog job=77: gpu 2: 300 W -> 400 W" in log


def test_an_epilog_whose_python_never_ran_is_cleaned_up_by_the_next_hook(tmp_path, log_file, job_env) -> None:
    """Interpreter gone between a job's Prolog and its Epilog: the wrapper marks the job ended
    in the state directory gpu.conf names, and the next job's Prolog restores its GPU."""
    hooks = install(tmp_path, log_file)
    state = tmp_path / "state"
    conf = tmp_path / "gpu.conf"
    conf.write_text(f"SLURM_GREEN_GPU_BACKEND=emulated\nSLURM_GREEN_GPU_EMULATED_STATE={state}/gpus.json\n"
                    f"export SLURM_GREEN_STATE_DIR='{state}'  # where the records are\nSLURM_GREEN_DEFAULT_CAP=0.75\n")
    env = {**job_env, "SLURM_GREEN_GPU_CONF": str(conf), "SLURM_JOB_GPUS": "2"}
    limits = lambda: json.loads((state / "gpus.json").read_text())["devices"]["2"]["current_w"]  # noqa: E731
    assert run(hooks["prolog"], env)[0].returncode == 0 and limits() == 300
    assert run(hooks["epilog"], {**env, "SLURM_GREEN_PYTHON": "/no/such/python3"})[0].returncode == 0
    assert (state / "jobs" / "77.ended").read_text() == "wrapper\n" and limits() == 300
    assert run(hooks["prolog"], {**env, "SLURM_JOB_ID": "78", "SLURM_JOB_GPUS": "0"})[0].returncode == 0
    assert limits() == 400
    assert "prolog job=78: job 77: its Epilog died before it was done" in log_file.read_text()
