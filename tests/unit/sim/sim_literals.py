"""A perfectly scaling literal model and helpers for simulator tests (imported by them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from slurm_green.carbon.signal import CarbonSignal
from slurm_green.core.models import Config
from slurm_green.sim.workload import Workload

T0 = pd.Timestamp("2023-06-05T00:00:00Z").timestamp()
HOUR = 3600.0


@dataclass(frozen=True)
class LinearModel:
    """One work unit per GPU-second at full power, half speed at cap 0.5; 100 W per GPU times the cap."""

    job_type: str = "linear"

    def throughput(self, config: Config) -> float:
        return config.gpus * config.cap_fraction

    def power_w(self, config: Config) -> float:
        return config.gpus * 100.0 * config.cap_fraction


class LinearModels:
    revision = 0

    def for_job(self, job_type: str | None, gpu: str | None = None) -> LinearModel:
        return LinearModel()

    def allowed_caps(self, gpu: str | None = None, *, accept_cap: bool = True, floor: float = 0.0,
                     step: float = 0.05) -> tuple[float, ...]:
        """A board that goes down to 60 %."""
        return (0.6, 0.7, 0.8, 0.9, 1.0) if accept_cap else (1.0,)


def flat_signal(value: float = 100.0, hours: int = 24 * 30) -> CarbonSignal:
    index = pd.date_range(pd.Timestamp(T0, unit="s", tz="UTC") - pd.Timedelta(hours=1), periods=hours, freq="h")
    return CarbonSignal.from_series(pd.Series(np.full(hours, value), index=index))


def workload(*jobs: tuple[float, int, float]) -> Workload:
    """Jobs as (submit offset s, GPUs, work = GPU-seconds at full power)."""
    return Workload.from_columns("test", np.array([T0 + j[0] for j in jobs]), np.array([j[1] for j in jobs]),
                                 ["linear"] * len(jobs), work=np.array([j[2] for j in jobs], dtype=float))
