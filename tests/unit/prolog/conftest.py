"""Fixtures of the Prolog/Epilog tests: a node in a temp dir, with emulated or fake-NVML GPUs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))  # the shared fake pynvml

from fake_pynvml import four_gpus, make_pynvml  # noqa: E402

@pytest.fixture
def node_env(tmp_path) -> dict[str, str]:
    """The environment slurmd gives the hooks, with settings pointing into ``tmp_path``."""
    (tmp_path / "decision.key").write_bytes(b"site-key-of-32-bytes-for-tests!!\n")
    (tmp_path / "decision.key").chmod(0o600)  # a key every user could read is refused
    return {
        "SLURM_GREEN_GPU_CONF": str(tmp_path / "gpu.conf"),
        "SLURM_GREEN_STATE_DIR": str(tmp_path / "state"),
        "SLURM_GREEN_DECISION_KEY": str(tmp_path / "decision.key"),
        "SLURM_GREEN_GPU_EMULATED_STATE": str(tmp_path / "state" / "gpus.json"),
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_GPUS": "1,3",
        "SLURM_JOB_COMMENT": "",
    }


@pytest.fixture
def fake_gpus(monkeypatch):
    gpus = four_gpus()
    monkeypatch.setitem(sys.modules, "pynvml", make_pynvml(gpus))
    return {gpu.minor: gpu for gpu in gpus}


@pytest.fixture
def no_nvml(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
