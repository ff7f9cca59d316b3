"""Fixtures for model tests: the real profile data, or a clear skip when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_green.models.data_paths import has_perf_energy, perf_energy_dir
from slurm_green.models.registry import FittedRegistry, fitted_params


@pytest.fixture(scope="session")
def perf() -> Path:
    path = perf_energy_dir()
    if not has_perf_energy(path.parent):
        pytest.skip(f"profile data not found under {path}; set SLURM_GREEN_DATA")
    return path.resolve()


@pytest.fixture()
def registry(perf: Path) -> FittedRegistry:
    """A fresh registry (own corrections) over the once-per-session fit of the real data."""
    return FittedRegistry(fitted_params(perf))
