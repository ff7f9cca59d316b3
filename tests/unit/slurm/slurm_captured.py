"""Raw Slurm output captured from each real Slurm version (tests/unit/slurm/fixtures/<version>/).

docker/capture-fixtures writes them; MANIFEST.txt in each folder names the command behind
each file (squeue.json, squeue-all.json, scontrol-show-nodes.json, sdiag.json, ...).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
VERSIONS = ("22.05", "24.11", "26.05")


def fixture_versions() -> list:
    """One pytest param per supported version; those not captured yet are skipped, saying so."""
    params = []
    for version in VERSIONS:
        folder = FIXTURES / version
        marks = (
            ()
            if (folder / "squeue.json").exists()
            else (pytest.mark.skip(reason=f"no captured Slurm {version} output in {folder}"),)
        )
        params.append(pytest.param(version, marks=marks, id=version))
    return params


def load_json(version: str, name: str) -> dict:
    path = FIXTURES / version / name
    if not path.exists():
        pytest.skip(f"{path} not captured")
    return json.loads(path.read_text())


def nodes_file(version: str) -> Path:
    """Where a version's node records are: `scontrol show nodes --json`, or 22.05's `sinfo --json`."""
    for name in ("scontrol-show-nodes.json", "sinfo.json"):
        path = FIXTURES / version / name
        if path.exists() and "nodes" in json.loads(path.read_text()):
            return path
    pytest.skip(f"no node records captured for Slurm {version}")


def sdiag_output(version: str) -> str:
    """`sdiag --json` (24.11+) or plain `sdiag` (22.05) output."""
    for name in ("sdiag.json", "sdiag.txt"):
        path = FIXTURES / version / name
        if path.exists():
            return path.read_text()
    pytest.skip(f"no sdiag output captured for Slurm {version}")
