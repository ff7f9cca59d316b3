"""Throughput and energy models of DL jobs, fitted from measured profiles.

Start here: ``default_registry().for_job(name)`` gives a ``JobModel``;
``colocated_slowdown`` and ``observe`` are on the registry. See docs/models.md.
"""

from slurm_green.core.models import Config, JobModel, ModelRegistry, energy_per_work_j, speedup
from slurm_green.models.registry import FittedJobModel, FittedRegistry, default_registry

__all__ = [
    "Config",
    "FittedJobModel",
    "FittedRegistry",
    "JobModel",
    "ModelRegistry",
    "default_registry",
    "energy_per_work_j",
    "speedup",
]
