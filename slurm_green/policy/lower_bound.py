"""A carbon lower bound: what no scheduler can beat on a workload.

An oracle that knows the whole future and ignores JCT and capacity: every job runs
in its most energy-efficient configuration (GPU count within its allowed range,
power cap) in the lowest-carbon window starting within ``horizon_s`` of its
submission. Capacity is ignored (all jobs may overlap), so the bound is loose where
the cluster is busy; it also leaves out idle power. A policy's distance to it is
the carbon that remains to be saved by any means that keep the same models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.models import ModelRegistry
from slurm_green.policy.config_table import config_table, gpu_options

_CHUNK = 4096


@dataclass(frozen=True)
class LowerBound:
    carbon_kg: float
    energy_kwh: float
    horizon_s: float
    capacity: str = "ignored"


def carbon_lower_bound(submit: np.ndarray, work: np.ndarray, job_type: list[str], requested: np.ndarray,
                       gpus_min: np.ndarray, gpus_max: np.ndarray, signal: CarbonForecast, models: ModelRegistry,
                       gpus_per_node: int, horizon_s: float = 7 * 86400.0,
                       caps: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)) -> LowerBound:
    """Sum over jobs of (least energy) x (lowest mean intensity over a window of that runtime)."""
    n = len(submit)
    per_job = [gpu_options(int(g), int(lo), int(hi), gpus_per_node)
               for g, lo, hi in zip(requested, gpus_min, gpus_max)]
    table = config_table(models, set(job_type), {g for o in per_job for g in o}, tuple(sorted(set(caps))),
                         gpus_per_node)
    col_of = {int(g): i for i, g in enumerate(table.gpus)}
    types = np.fromiter((table.type_index[t] for t in job_type), dtype=np.int64, count=n)
    joules_per_work = table.power_w / table.throughput  # [T, G, C]
    best_jpw = np.empty(n)
    runtime = np.empty(n)
    for j, opts in enumerate(per_job):
        cols = [col_of[g] for g in opts]
        sub = joules_per_work[types[j]][cols]
        g, c = np.unravel_index(int(np.argmin(sub)), sub.shape)
        best_jpw[j] = sub[g, c]
        runtime[j] = work[j] / table.throughput[types[j], cols[g], c]
    energy_kwh = work * best_jpw / 3.6e6
    intensity = _best_window_intensity(np.asarray(submit, dtype=np.float64), runtime, signal, horizon_s)
    return LowerBound(float((energy_kwh * intensity).sum() / 1000.0), float(energy_kwh.sum()), horizon_s)


def _best_window_intensity(submit: np.ndarray, runtime: np.ndarray, signal: CarbonForecast,
                           horizon_s: float) -> np.ndarray:
    """Per job, the lowest mean intensity (g/kWh) of a run starting in [submit, submit + horizon]."""
    step = float(signal.step)
    offsets = np.arange(0.0, horizon_s + step, step)
    out = np.empty(len(submit))
    for lo in range(0, len(submit), _CHUNK):
        s = submit[lo: lo + _CHUNK]
        r = runtime[lo: lo + _CHUNK]
        # The window mean is piecewise linear in the start, with kinks where the start or the
        # end crosses a period boundary: those starts, and submission itself, are the candidates.
        first = (np.floor(s / step) + 1) * step
        first_end = (np.floor((s + r) / step) + 1) * step - r
        starts = np.column_stack([s, first[:, None] + offsets[None, :-1], first_end[:, None] + offsets[None, :-1]])
        starts = np.where(starts <= (s + horizon_s)[:, None], starts, s[:, None])
        means = signal.mean_over(starts, starts + r[:, None])
        out[lo: lo + _CHUNK] = np.asarray(means).min(axis=1)
    return out
