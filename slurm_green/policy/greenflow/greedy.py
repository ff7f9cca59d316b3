"""GreenFlow's greedy plans: one price (seconds of JCT per kg CO2, or per kWh) -> one plan.

For one price the plan is built in bulk (numpy over jobs x GPU columns x starts x caps, and
over a block of prices at once): per job and GPU count the cap of least cost; a job defers,
at its requested size, where its window costs less than starting now; the jobs starting now
are admitted FIFO first-fit at their smallest allowed count (``_admit``), then the GPUs
still free are handed out in increments along each job's chain, best cost saved per extra GPU
first (``_increments``). ``price_grid`` walks the fixed grid of prices the budgeted policy
chooses among; ``agnostic_choice`` is the carbon-agnostic plan every budget is measured by.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from slurm_green.policy.greenflow.options import Choice, Options


#: The price grid: the scale guess (reference runtime / reference carbon) times 2**k for these k.
_PRICE_STEPS = range(-8, 17)
#: ``_choose_walk`` prices this many cost entries (prices x cells x caps, ``Options.cells``) at once at most.
_CHOOSE_BLOCK_ELEMENTS = 1 << 16


def greedy_choice(o: Options, price: float, free_gpus: int) -> Choice:
    """The greedy plan at ``price`` (seconds of JCT per budget unit)."""
    return _choose_walk(o, [price], free_gpus, -math.inf)[0][0]


def _choose_walk(o: Options, prices: list[float], free_gpus: int, floor: float) -> list[tuple[Choice, float]]:
    """The greedy plan at each of ``prices`` in turn, up to and including the first that spends
    no more than ``floor``, each distinct plan once, with the first price giving it.

    The price-dependent arrays are computed for a block of prices at once ([P, K, C] over the
    cells some cap can take, then [P, N, G, S]: the same elementwise arithmetic per price, so
    the same plans as one price at a time);
    blocks are small enough to keep the memory bounded, and the walk stops at ``floor`` as
    a price-by-price walk would (a plan repeated spends what it spent before, more than
    ``floor``). Most prices repeat a plan: a one-job queue has a few distinct plans in 26.
    """
    rows, cells = o.rows, o.cells
    energy, intensity, base = o.priced
    every = (o.runtime.shape[0], len(o.gpus), o.starts)  # all the [N, G, S] cells
    per_price = base.size
    block = max(1, min(len(prices), _CHOOSE_BLOCK_ELEMENTS // max(per_price, 1)))
    sizes, queued_col, chain = o.sizes, o.queued_col, o.chain
    plans: list[tuple[Choice, float]] = []
    seen: set[bytes] = set()
    # Most prices want the same jobs now: each distinct set is admitted once (per walk: on a
    # long queue a block holds one price).
    admits: dict[tuple[bool, ...], tuple[list[bool], int]] = {}
    for first in range(0, len(prices), block):
        chunk = np.asarray(prices[first:first + block], dtype=np.float64)
        # cost[P, K, C] of the cells some cap can take (``Options.cells``); non-allowed caps are
        # inf. Same arithmetic, in the same order, as (wait + runtime) + (price * energy) * intensity.
        cost = np.multiply(chunk[:, None, None], energy)
        cost *= intensity
        cost += base
        best = cost.argmin(axis=2)  # [P, K]
        # The minimum over caps is the value at the argmin (no NaN can arise: energy and
        # intensity are finite); gathering it is cheaper than a second reduction.
        least = cost.reshape(-1, cost.shape[2])[np.arange(best.size), best.reshape(-1)].reshape(best.shape)
        # Onto every cell [P, N, G, S]: the others cost inf at every cap, whose argmin is cap 0. S is
        # only "now" when no job can defer (every deferred cost would be inf).
        cap_best = np.zeros((len(chunk), *every), dtype=best.dtype)
        cap_best.reshape(len(chunk), -1)[:, cells] = best
        cost_gs = np.full((len(chunk), *every), np.inf)
        cost_gs.reshape(len(chunk), -1)[:, cells] = least
        if o.starts == 2:  # a job defers at its requested size (see ``queued_col``)
            deferred = cost_gs[:, rows, queued_col, 1] < cost_gs[:, :, :, 0].min(axis=2)
        else:
            deferred = np.zeros((len(chunk), len(rows)), dtype=bool)
        wants_now = [tuple(wants) for wants in (~deferred).tolist()]
        for wants in wants_now:
            if wants not in admits:
                admits[wants] = _admit(sizes, wants, free_gpus)
        admitted_l, spare_l = zip(*[admits[wants] for wants in wants_now])
        admitted = np.array(admitted_l, dtype=bool).reshape(len(chunk), len(rows))
        steps = _increments(cost_gs, o, admitted, np.array(spare_l, dtype=np.int64))
        col = np.where(admitted, chain[rows, steps], queued_col)  # [P, N]
        start = deferred.astype(np.int64)
        cap = cap_best[np.arange(len(chunk))[:, None], rows, col, start]
        # Each plan's spend is summed on its own row (a 1-D sum, as one price at a time sums it).
        carbon = o.energy_kwh[rows, col, cap] * o.intensity[rows, start]
        packed = _packed(col, start, admitted, cap)
        for k in range(len(chunk)):
            plan = packed[k].tobytes()
            if plan in seen:
                continue
            seen.add(plan)
            spent = float(carbon[k].sum())
            plans.append((Choice(col[k], cap[k], start[k], admitted[k], spent), prices[first + k]))
            if spent <= floor:
                return plans
    return plans


def price_grid(o: Options, free_gpus: int) -> list[tuple[Choice, float]]:
    """The greedy plan at price 0 and at the scale guess times 2**k, ascending (each distinct
    plan once, with the first of these prices that gives it).

    The guess puts a job's runtime and its priced carbon on the same scale (total
    reference runtime / total reference carbon). The walk stops once a plan spends no
    more than the carbon floor (no plan spends less). Nothing here depends on the budget.
    """
    rows = o.rows
    runtime = o.runtime[rows, o.requested_col, o.full_cap]
    reference = float((o.energy_kwh[rows, o.requested_col, o.full_cap] * o.intensity[:, 0]).sum())
    guess = max(float(np.where(np.isfinite(runtime), runtime, 0.0).sum()) / max(reference, 1e-12), 1e-6)
    floor = o.carbon_floor * (1 + 1e-9)
    prices = [0.0] + [guess * 2.0 ** k for k in _PRICE_STEPS]
    return _choose_walk(o, prices, free_gpus, floor)


def _admit(sizes: list[int], wants_now: Sequence[bool], free: int) -> tuple[list[bool], int]:
    """FIFO first-fit: each job wanting to start now takes ``sizes[j]`` GPUs if they are still free.

    Returns the admitted mask (a list) and the GPUs left. Admission stops as soon as no GPU is
    left (every size is at least 1): on a full cluster a long queue costs no pass. A plain loop:
    the queue is mostly a handful of jobs, for which numpy's per-call overhead dominates (and
    ``_choose_walk`` runs this several times a tick).
    """
    admitted = [False] * len(sizes)
    left = free
    for j, size in enumerate(sizes):
        if left <= 0:
            break
        if wants_now[j] and size <= left:
            admitted[j] = True
            left -= size
    return admitted, left


def _increments(cost_gs: np.ndarray, o: Options, admitted: np.ndarray, spare: np.ndarray) -> np.ndarray:
    """How many steps along its GPU chain each admitted job climbs with ``spare`` GPUs, for
    P plans at once (one per price).

    ``cost_gs`` is the best cost per plan, job, GPU column and start [P, N, G, S],
    ``admitted`` [P, N] and ``spare`` [P] each plan's; steps are scored on starting now.
    Utility of a step = cost saved / extra GPUs; steps are made non-increasing per job (so a
    job's steps are taken in order) and taken best first while the plan's GPUs remain.
    Computed over all jobs with the non-admitted ones' steps masked out, which selects the
    same steps in the same order as computing over the admitted rows only; and over all
    plans at once, each plan's steps sorted and counted within its own group, which selects
    the same steps as one plan at a time. Returns the steps [P, N].
    """
    plans, n = admitted.shape
    steps = np.zeros((plans, n), dtype=np.int64)
    # A plan with no GPU to spare or no job admitted climbs no step.
    climbing = np.flatnonzero((spare > 0) & admitted.any(axis=1))
    if o.chain.shape[1] < 2 or not len(climbing):
        return steps
    if len(climbing) < plans:
        steps[climbing] = _increments(cost_gs[climbing], o, admitted[climbing], spare[climbing])
        return steps
    here, there, valid, extra = o.step_table
    flat = cost_gs.reshape(plans, -1)
    with np.errstate(invalid="ignore"):  # inf - inf only where the step is invalid (masked below)
        saved = flat[:, here] - flat[:, there]  # [P, N, M - 1]
    utility = np.where(valid & admitted[:, :, None], saved / extra, -np.inf)
    utility = np.minimum.accumulate(utility, axis=2)
    p, r, m = (utility > 0).nonzero()
    if not len(p):
        return steps
    # Per plan, best utility first, then the earlier step, then the earlier job (the order
    # ``nonzero`` gives within a plan and a stable sort keeps).
    order = np.lexsort((m, -utility[p, r, m], p))
    p, r, m = p[order], r[order], m[order]
    used = extra[r, m].cumsum()
    # GPUs the plan's earlier steps take: the running total less what earlier plans' steps took.
    first = np.searchsorted(p, np.arange(plans))
    before = np.concatenate(([0], used))[first]
    fits = used - before[p] <= spare[p]
    # Steps taken per (plan, row): the same counts as np.add.at(steps, rows, 1), without its slow path.
    return np.bincount(p[fits] * n + r[fits], minlength=plans * n).astype(np.int64).reshape(plans, n)


def agnostic_choice(o: Options, free_gpus: int) -> Choice:
    """The carbon-agnostic plan as a choice: requested GPUs (``plain_col``: the allowed size
    closest to a request outside the job's range), full power, start now, FIFO first-fit.

    Its spend is the budget's reference, so at a budget of at least 1 it always fits.
    """
    rows = o.rows
    col = o.plain_col
    sizes = o.gpus[col].tolist()
    admitted = np.array(_admit(sizes, [True] * len(sizes), free_gpus)[0], dtype=bool)
    cap = np.full(len(rows), o.full_cap)
    spent = float((o.energy_kwh[rows, col, o.full_cap] * o.intensity[:, 0]).sum())
    return Choice(col, cap, np.zeros(len(rows), dtype=np.int64), admitted, spent)


def _packed(col: np.ndarray, start: np.ndarray, admitted: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """What tells plans apart, on the last axis (one row per plan): their columns, starts and
    admissions (a shape: the first three quarters, what a placement depends on), then their caps."""
    return np.concatenate((col, start, admitted, cap), axis=-1, dtype=np.int64)


def plan_key(choice: Choice) -> bytes:
    """``_packed`` of one plan, as a dict key."""
    return _packed(choice.col, choice.start, choice.admitted, choice.cap).tobytes()
