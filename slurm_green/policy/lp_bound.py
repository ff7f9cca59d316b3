"""The capacity-aware carbon lower bound: a linear relaxation of every schedule the cluster could run.

Time is cut into slots: each period of the carbon series from the first submission's up
to ``fine_until``, then blocks of ``coarse_periods`` periods up to the series' end, then one
*tail* slot from the end on (where the last value holds) without limits. A slot's intensity
is the **least** of its periods'. Variables ``z[i, t] >= 0``: the fraction of job ``j``'s
work done in slot ``t`` in configuration ``i`` (``bound_configs``: every count, layout and
cap of its GPU type; power ``P_i``, GPUs ``g_i``, runtime ``r_i`` for the whole work).

    minimise   sum_j w_j                                             (kg)
    subject to sum_{i of j, t} z[i, t] = 1                           each job's work completes
               sum_{i of j} r_i z[i, t] <= seconds of t after j's submission   (0 before it)
               sum_{i on type k} g_i r_i z[i, t] <= GPUs of type k x length of t
               w_j >= cost_j = sum_{i of j, t} P_i r_i v_t z[i, t] / 3.6e9
               w_j >= B_j, the job's capacity-blind bound (``lower_bound.py``)

**Why it is a lower bound.** Take any schedule the simulator (or Slurm) could run with no
GPU shared between jobs: each job, from its submission on, runs in configurations of its
candidate set, one at a time, with at most the cluster's GPUs of each type in use at any
instant. Set ``z[i, t]`` to the share of ``j``'s work done in ``i`` during ``t``. All its work
is done (first row); ``j`` runs at most the slot's length after its submission (second);
integrating the GPUs in use over a slot gives at most GPUs x length (third); its ``cost_j``,
power times each slot's least intensity for the time it runs there, is at most its carbon
(equal where a slot is one period), and so is ``B_j``; set ``w_j`` to its carbon. So every
schedule is a feasible point whose objective is its carbon, and the LP's optimum is at most
the carbon of every schedule. Configurations dropped as dominated (``Keep.LP``: no better on
GPU-seconds, energy and time per unit of work than one kept or a mix of kept ones) change
nothing: moving their share to what beats them keeps the rows satisfied and no ``cost_j``
higher, and ``w_j`` may stay where it was.

**What the rows buy.** The relaxation alone lets a job pause and resume (a 2-hour job could
run an hour in each of two clean hours with a dirty one between) and change configuration,
and coarse slots take each block's cleanest period: ``cost_j`` alone can fall far below the
capacity-blind bound. ``w_j >= B_j`` makes the LP never below that bound; it is above it
where jobs compete for the same clean slots (capacity), by what the relaxation cannot share
out. (A per-job row ``cost_j >= B_j`` on the slots' intensities would be valid with every
configuration, but not together with dropping the dominated ones, which is what keeps the LP
this small.) GPUs stay a pool (no fragmentation). A start within the job's flexibility is
not a constraint: in a real run a job may queue past its deadline, so it would cut off real
schedules. The solver's tolerances (HiGHS, about 1e-7) apply.

**Size.** Variables are (configuration, slot) pairs after each job's submission; above
``max_variables`` it refuses (``LpTooLarge``) instead of running for hours: coarser slots
(``coarse_periods``, an earlier ``fine_until``) or fewer jobs. Pollux-sized workloads (160
jobs) and a few hundred Gavel jobs fit at the default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from slurm_green.carbon.signal import CarbonSignal
from slurm_green.core.models import ModelRegistry
from slurm_green.policy.bound_configs import BoundJobs, ClusterShape, Keep, candidates
from slurm_green.policy.lower_bound import carbon_lower_bound

MAX_VARIABLES = 3_000_000


class LpTooLarge(ValueError):
    """The LP would have more variables than allowed."""


@dataclass(frozen=True)
class Slots:
    """Consecutive time slots: start (s), length (s; the tail's is infinite) and least intensity (g/kWh)."""

    start: np.ndarray
    length: np.ndarray
    intensity: np.ndarray

    @property
    def end(self) -> np.ndarray:
        return self.start + self.length


@dataclass(frozen=True)
class LpBound:
    carbon_kg: float
    variables: int
    slots: int
    capacity: str = "respected (relaxed: preemption, configuration changes, no fragmentation)"


def slots(signal: CarbonSignal, first: float, fine_until: float, coarse_periods: int) -> Slots:
    """Periods from the one holding ``first`` to ``fine_until``, blocks of ``coarse_periods`` periods to the
    series' end, and the tail; each slot at the least intensity of its periods."""
    step = float(signal.step)
    values = np.asarray(signal.values, dtype=np.float64)
    lead = max(0, math.ceil((signal.start - first) / step))  # periods before the series: its first value
    grid = np.concatenate((np.full(lead, values[0]), values))
    origin = signal.start - lead * step
    begin = int(np.floor((first - origin) / step))
    fine_end = min(len(grid), max(begin + 1, math.ceil((fine_until - origin) / step)))
    edges = np.concatenate((np.arange(begin, fine_end), np.arange(fine_end, len(grid), max(1, coarse_periods)),
                            [len(grid)]))
    least = np.minimum.reduceat(grid, edges[:-1])
    start = origin + edges * step
    return Slots(start, np.concatenate((np.diff(start), [np.inf])), np.concatenate((least, [values[-1]])))


def lp_lower_bound(jobs: BoundJobs, signal: CarbonSignal, models: ModelRegistry, shape: ClusterShape,
                   fine_until: float | None = None, coarse_periods: int = 24,
                   max_variables: int = MAX_VARIABLES) -> LpBound:
    """The LP above; ``fine_until`` defaults to a week after the last submission."""
    cand = candidates(jobs, models, shape, Keep.LP)
    last = float(jobs.submit.max())
    grid = slots(signal, float(jobs.submit.min()), last + 7 * 86400.0 if fine_until is None else fine_until,
                 coarse_periods)
    n_slots = len(grid.start)
    submit = jobs.submit[cand.job]
    first = np.searchsorted(grid.end, submit, side="right")  # first slot ending after the submission
    counts = n_slots - first
    n_var = int(counts.sum())
    if n_var > max_variables:
        raise LpTooLarge(f"the LP would have {n_var:,} variables ({len(jobs)} jobs, {len(cand.job):,} configurations, "
                         f"{n_slots:,} slots), more than {max_variables:,}: use coarser slots or fewer jobs")
    var_cand = np.repeat(np.arange(len(cand.job)), counts)
    var_slot = first[var_cand] + np.arange(n_var) - np.repeat(np.cumsum(counts) - counts, counts)
    job = cand.job[var_cand]
    runtime = cand.runtime_s[var_cand]
    finite = var_slot < n_slots - 1  # the tail has no time or capacity limit
    # Job-time rows, one per (job, finite slot after its submission), scaled to a right side of 1.
    job_first = np.full(len(jobs), n_slots, dtype=np.int64)
    np.minimum.at(job_first, cand.job, first)
    job_rows = np.maximum(n_slots - 1 - job_first, 0)
    row_base = np.cumsum(job_rows) - job_rows
    avail = grid.end[var_slot] - np.maximum(grid.start[var_slot], jobs.submit[job])
    time_row = row_base[job] + var_slot - job_first[job]
    # Capacity rows, one per (GPU type, finite slot).
    kinds = sorted(set(jobs.gpu_type), key=lambda k: k or "")
    kind_of = np.array([kinds.index(k) for k in jobs.gpu_type], dtype=np.int64)[job]
    gpus_of = np.array([shape.gpus(k) for k in kinds], dtype=np.float64)[kind_of]
    n_time = int(job_rows.sum())
    cap_row = n_time + kind_of * (n_slots - 1) + var_slot
    rows = np.concatenate((time_row[finite], cap_row[finite]))
    cols = np.concatenate((np.flatnonzero(finite),) * 2)
    data = np.concatenate(((runtime / avail)[finite],
                           (cand.gpus[var_cand] * runtime / (gpus_of * grid.length[var_slot]))[finite]))
    cost = cand.power_w[var_cand] * runtime * grid.intensity[var_slot] / 3.6e9
    n_ub, n_jobs = n_time + len(kinds) * (n_slots - 1), len(jobs)
    # Each job's carbon w_j: at least its cost here, and at least its capacity-blind bound (w_j's lower bound).
    floor = carbon_lower_bound(jobs, signal, models, shape).per_job_kg
    scale = np.where(floor > 0, floor, 1.0)
    all_z = np.arange(n_var)
    rows = np.concatenate((rows, n_ub + job, n_ub + np.arange(n_jobs)))
    cols = np.concatenate((cols, all_z, n_var + np.arange(n_jobs)))
    data = np.concatenate((data, cost / scale[job], -1.0 / scale))
    b_ub = np.concatenate((np.ones(n_ub), np.zeros(n_jobs)))
    a_ub = coo_matrix((data, (rows, cols)), shape=(n_ub + n_jobs, n_var + n_jobs)).tocsr()
    a_eq = coo_matrix((np.ones(n_var), (job, all_z)), shape=(n_jobs, n_var + n_jobs)).tocsr()
    objective = np.concatenate((np.zeros(n_var), np.ones(n_jobs)))
    bounds = np.column_stack((np.concatenate((np.zeros(n_var), floor)), np.full(n_var + n_jobs, np.inf)))
    result = linprog(objective, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.ones(n_jobs), bounds=bounds,
                     method="highs")
    if result.status != 0:
        raise RuntimeError(f"the LP bound's solver failed: {result.message}")
    return LpBound(float(result.fun), n_var, n_slots)
