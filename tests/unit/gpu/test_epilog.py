"""The Epilog's Python on its own (the wrappers are tests/unit/prolog/test_wrappers.py)."""

from __future__ import annotations

import errno
import json
import pathlib
from pathlib import Path

import pytest

from slurm_green.core import decision_token
from slurm_green.gpu import epilog, prolog

KEY = b"site-key-of-32-bytes-for-tests!!"


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """A node whose job 42 on GPU 1 was decided cap 0.7 (emulated: 280 of 400 W)."""
    key = tmp_path / "decision.key"
    key.write_bytes(KEY + b"\n")
    key.chmod(0o600)
    return {
        "SLURM_GREEN_GPU_CONF": str(tmp_path / "gpu.conf"),
        "SLURM_GREEN_STATE_DIR": str(tmp_path / "state"),
        "SLURM_GREEN_DECISION_KEY": str(key),
        "SLURM_GREEN_GPU_EMULATED_STATE": str(tmp_path / "state" / "gpus.json"),
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_GPUS": "1",
        "SLURM_JOB_COMMENT": decision_token.sign(KEY, 42, {"cap": 0.7}),
    }


def limit_w(env: dict[str, str], minor: int) -> float:
    return json.loads(Path(env["SLURM_GREEN_GPU_EMULATED_STATE"]).read_text())["devices"][str(minor)]["current_w"]


@pytest.mark.parametrize("broken", ["SLURM_GREEN_DEFAULT_CAP=0.8x\n", b"# caf\xe9\n"])
def test_an_epilog_that_fails_leaves_no_cap_once_the_next_job_has_left(env, no_nvml, capsys, broken) -> None:
    """A bad or unreadable gpu.conf while the job ran: its Epilog fails and exits 0, so the wrapper
    marks nothing; the Epilog marks the job ended itself, or its record would hold GPU 1 (at its
    cap after every later job) until a reboot."""
    assert prolog.main(env) == 0
    assert limit_w(env, 1) == 280
    conf = Path(env["SLURM_GREEN_GPU_CONF"])
    conf.write_bytes(broken.encode() if isinstance(broken, str) else broken)
    assert epilog.main(env) == 0
    conf.write_text("SLURM_GREEN_DEFAULT_CAP=none\n")  # fixed
    later = {**env, "SLURM_JOB_ID": "43", "SLURM_JOB_COMMENT": ""}
    assert prolog.main(later) == 0 and epilog.main(later) == 0
    assert limit_w(env, 1) == 400
    err = capsys.readouterr().err
    assert "job=42: job marked ended" in err and "job 42: its Epilog died before it was done" in err


def test_a_full_state_disk_does_not_keep_the_epilog_from_restoring(env, fake_nvml, gpus, monkeypatch, capsys) -> None:
    """/var full at the job's end: the Epilog's bookkeeping writes fail, the limits need no disk.
    The GPU gets its limit back, and the job's record is gone, so once space is freed the next
    job's Epilog does not leave the GPU at the dead job's cap."""
    gpu = next(g for g in gpus if g.minor == 1)
    assert prolog.main(env) == 0
    assert gpu.limit_mw == 175_000  # 0.7 x 250 W
    state, write_text = env["SLURM_GREEN_STATE_DIR"], pathlib.Path.write_text

    def full(path: pathlib.Path, *args, **kwargs):
        if str(path).startswith(state):
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_text(path, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", full)
    assert epilog.main(env) == 0
    assert gpu.limit_mw == 250_000
    assert "could not mark the job ended" in capsys.readouterr().err
    monkeypatch.setattr(pathlib.Path, "write_text", write_text)  # space freed
    later = {**env, "SLURM_JOB_ID": "43", "SLURM_JOB_COMMENT": ""}
    assert prolog.main(later) == 0 and epilog.main(later) == 0
    assert gpu.limit_mw == 250_000
