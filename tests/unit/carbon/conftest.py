"""Shared fixtures for the carbon tests: the real data directory and a UTC clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_green.carbon.datasets import carbon_files, shared_data_dir


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data directory (``$SLURM_GREEN_DATA``, default ``<repo>/../shared/data``)."""
    path = shared_data_dir()
    if not (path / "carbon").is_dir():
        pytest.skip(f"shared data not found at {path} (set SLURM_GREEN_DATA to the folder holding carbon/)")
    return path


@pytest.fixture(scope="session")
def carbon_csvs(shared_data: Path) -> dict[str, Path]:
    """Region code -> real hourly Electricity Maps 2023 CSV."""
    return carbon_files()
