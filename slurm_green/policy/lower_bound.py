"""The capacity-blind carbon lower bound: what no schedule can beat, job by job.

Each job alone, with perfect knowledge of the carbon series: the least, over every
configuration it could run in (``bound_configs``: every GPU count of its range in every
layout, every cap of its GPU type, that type's models) and every start at or after its
submission (no horizon: beyond the series' end the last value holds, so a start at the
end covers every later one), of ``power x integral of intensity over the run``
(``least_window``, exact). The sum over jobs bounds any schedule under the same models:
each job of a schedule runs in one such configuration from one such start, so it emits at
least its own minimum; capacity is ignored (all jobs may overlap), and idle power is left
out (bounds the jobs' carbon, ``carbon_kg``).

What it does not cover: two jobs sharing a GPU (EaCO co-location) draw the pair's power,
which no solo configuration describes; the bound holds for runs where no job shares.

Until issue 10 this took each job's least-energy configuration and then that
configuration's best window within 7 days: a faster configuration can reach a cleaner
trough, and real waits can exceed 7 days, so policies were measured below that "bound".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurm_green.carbon.signal import CarbonSignal
from slurm_green.core.models import ModelRegistry
from slurm_green.policy.bound_configs import BoundJobs, ClusterShape, Keep, candidates
from slurm_green.policy.least_window import least_per_group


@dataclass(frozen=True)
class LowerBound:
    carbon_kg: float
    per_job_kg: np.ndarray
    capacity: str = "ignored"


def carbon_lower_bound(jobs: BoundJobs, signal: CarbonSignal, models: ModelRegistry, shape: ClusterShape) -> LowerBound:
    """Sum over jobs of the least ``power x integral of intensity`` over every configuration and start."""
    cand = candidates(jobs, models, shape, Keep.CARBON)
    per_job = least_per_group(signal, jobs.submit[cand.job], cand.runtime_s, cand.power_w, cand.job, len(jobs)) / 3.6e9
    return LowerBound(float(per_job.sum()), per_job)
