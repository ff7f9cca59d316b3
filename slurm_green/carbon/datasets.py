"""Where the shared real data lives (never copied into the repo).

Tests and benchmarks read the Electricity Maps 2023 series from
``$SLURM_GREEN_DATA/carbon`` (default ``<repo>/../shared/data``).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_data_dir() -> Path:
    """The shared data directory: ``$SLURM_GREEN_DATA`` or ``<repo>/../shared/data``."""
    return Path(os.environ.get("SLURM_GREEN_DATA", REPO_ROOT.parent / "shared" / "data"))


def carbon_files() -> dict[str, Path]:
    """Region code -> hourly Electricity Maps CSV, e.g. ``{"DE-LU": .../em_DE-LU_2023_hourly.csv}``."""
    folder = shared_data_dir() / "carbon"
    return {p.name.removeprefix("em_").split("_")[0]: p for p in sorted(folder.glob("em_*_hourly.csv"))}
