"""Where the measured profiles live, for the commands that fit or evaluate (never the controller).

The data is never copied into the repository (licences); a fit is run on purpose with
``slurm-green models fit --data DIR``. ``$SLURM_GREEN_DATA`` or ``<repo root>/../shared/data``
is only the default those commands, the benchmarks and the tests look in.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Files a fit cannot do without (relative to ``perf_energy/``).
REQUIRED = ("gavel/simulation_throughputs.json", "zeus/summary_power_v100.csv", "h100/cap_sweep.csv")


def data_dir() -> Path:
    """The shared data directory (it may not exist)."""
    return Path(os.environ.get("SLURM_GREEN_DATA", REPO_ROOT.parent / "shared" / "data"))


def perf_energy_dir(root: Path | None = None) -> Path:
    return (root if root is not None else data_dir()) / "perf_energy"


def has_perf_energy(root: Path | None = None) -> bool:
    base = perf_energy_dir(root)
    return all((base / name).is_file() for name in REQUIRED)
