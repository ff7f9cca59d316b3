"""Where the measured profiles live: ``$SLURM_GREEN_DATA`` or ``<repo root>/../shared/data``.

The data is never copied into the repository (licences), so every loader asks here.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """The shared data directory (it may not exist: callers fall back to built-in parameters)."""
    return Path(os.environ.get("SLURM_GREEN_DATA", REPO_ROOT.parent / "shared" / "data"))


def perf_energy_dir(root: Path | None = None) -> Path:
    return (root if root is not None else data_dir()) / "perf_energy"


def has_perf_energy(root: Path | None = None) -> bool:
    base = perf_energy_dir(root)
    return (base / "gavel" / "simulation_throughputs.json").is_file() and (base / "zeus").is_dir()
