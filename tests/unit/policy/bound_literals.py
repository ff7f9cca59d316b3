"""A table model whose runtimes are whole minutes, and brute-force bounds to check the real ones against."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from policy_literals import NOW
from slurm_green.carbon.signal import CarbonSignal
from slurm_green.core.models import Config
from slurm_green.policy.bound_configs import BoundJobs, ClusterShape

MINUTE = 60.0
WORK = 7200.0
#: (GPUs, cap) -> (throughput, power W): with WORK, runtimes of 120, 150, 75 and 96 minutes.
TABLE = {(1, 1.0): (1.0, 200.0), (1, 0.5): (0.8, 120.0), (2, 1.0): (1.6, 400.0), (2, 0.5): (1.25, 240.0)}


@dataclass(frozen=True)
class TableModel:
    job_type: str = "table"

    def throughput(self, config: Config) -> float:
        return TABLE[(config.gpus, config.cap_fraction)][0]

    def power_w(self, config: Config) -> float:
        return TABLE[(config.gpus, config.cap_fraction)][1]


class TableModels:
    def for_job(self, job_type: str | None, gpu: str | None = None) -> TableModel:
        return TableModel()

    def allowed_caps(self, gpu: str | None = None, *, accept_cap: bool = True, floor: float = 0.0,
                     step: float = 0.05) -> tuple[float, ...]:
        return (0.5, 1.0) if accept_cap else (1.0,)


def table_jobs(submit_min: list[float], low: int = 1, high: int = 2, requested: int = 1) -> BoundJobs:
    """Jobs of WORK units submitted ``submit_min`` minutes after NOW, allowed ``low``..``high`` GPUs."""
    n = len(submit_min)
    return BoundJobs(NOW + np.asarray(submit_min, dtype=float) * MINUTE, np.full(n, WORK), ("table",) * n,
                     (None,) * n, np.full(n, requested), np.ones(n, dtype=np.int64), np.full(n, low), np.full(n, high))


def one_node(gpus: int) -> ClusterShape:
    return ClusterShape(gpus_per_node=gpus, nodes={None: 1})


def configs(low: int, high: int) -> list[tuple[int, float]]:
    return [(g, c) for g in range(low, high + 1) for c in (0.5, 1.0)]


def run_kg(forecast: CarbonSignal, gpus: int, cap: float, start: float) -> float:
    """Carbon of one table job in (gpus, cap) from ``start``, from the signal's own mean."""
    tput, power = TABLE[(gpus, cap)]
    runtime = WORK / tput
    return power * runtime * float(forecast.mean_over(start, start + runtime)) / 3.6e6 / 1000.0


def minute_starts(forecast: CarbonSignal, earliest: float) -> np.ndarray:
    """Every whole minute from ``earliest`` to the series' end: with whole-minute runtimes and hourly
    periods every kink of a window's integral is among them, so the minimum over them is exact."""
    return np.arange(earliest, forecast.end + MINUTE, MINUTE)


def brute_force_job_kg(forecast: CarbonSignal, submit: float, low: int, high: int) -> float:
    return min(run_kg(forecast, g, c, s) for g, c in configs(low, high) for s in minute_starts(forecast, submit))


def brute_force_schedule_kg(forecast: CarbonSignal, jobs: BoundJobs, cluster_gpus: int, grid_s: float) -> float:
    """The least carbon of any schedule with starts on a ``grid_s`` grid (not before submission, until the
    series' end) whose GPUs in use never exceed ``cluster_gpus``: at least the true optimum."""
    options = []
    for j in range(len(jobs)):
        starts = np.arange(jobs.submit[j], forecast.end + grid_s, grid_s)
        options.append([(g, c, s) for g, c in configs(int(jobs.gpus_min[j]), int(jobs.gpus_max[j])) for s in starts])
    best = np.inf
    for plan in itertools.product(*options):
        runs = [(s, s + WORK / TABLE[(g, c)][0], g) for g, c, s in plan]
        if all(sum(g for s, e, g in runs if s <= t < e) <= cluster_gpus for t, _, _ in runs):
            best = min(best, sum(run_kg(forecast, g, c, s) for g, c, s in plan))
    return best

