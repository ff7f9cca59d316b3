"""GreenFlow and PowerFlow: shortest average JCT under a carbon (or energy) budget.

After GreenFlow (TPDS 2024): each pending job gets a GPU count within its allowed
range, a power cap and a start time. The objective is the sum of the jobs' expected
completion times (wait + runtime), and the budget is priced in with a Lagrange
multiplier ``price`` (seconds of JCT per kg CO2, or per kWh for PowerFlow):

    cost(job, gpus, cap, start) = wait(start) + runtime(gpus, cap) + price * carbon(gpus, cap, start)

For one price the plan is built greedily and in bulk (numpy over jobs x GPU
options x caps x starts):

1. per job, per GPU count and start, the cap with the lowest cost;
2. a job defers, at its requested size, to its lowest-carbon window before its deadline
   if that is cheaper than starting now (never for PowerFlow: energy does not depend on
   the hour);
3. jobs starting now are admitted in FIFO order at their smallest allowed count
   (shrinking toward efficient configurations frees GPUs for the queue);
4. GPUs still free are handed out in increments (doubling a job's count), best
   JCT-saved-minus-priced-extra-carbon per extra GPU first, while that is positive:
   when carbon is cheap more increments pay off, when it is dear fewer do;
5. a job that does not start now keeps its **requested** count (at the price's cap): Slurm
   starts it between ticks the moment GPUs free, at whatever size it carries, so the
   increments that were to follow a shrink never come, and the shrunk size would be
   read back as its request at the next tick (see ``_Options.queued_col``);
6. jobs admitted now get nodes (network packing, buddy blocks), see ``placement``, only
   among the nodes their partition allows, laid out in those nodes' GPUs per node
   (``_Where``); one that does not fit is not started and queues at its requested size
   (``_enact``).

Every plan is scored by one objective (``_expected_cost_s``): the expected sum of the
pending jobs' completion times (admitted jobs start now, the others as GPUs free,
oldest first, running and planned jobs ending by their time limits), plus, while
jobs queue, the delay its GPU-seconds cause the jobs queued behind. With a budget
(``budget_fraction`` times the carbon of the same jobs run the carbon-agnostic way:
requested GPUs, full power, start now or queue) the candidates are the carbon-agnostic
plan itself and the greedy plan at each price of a fixed grid, each scored and budgeted as
enacted (after placement) and as queued: a plan's carbon is each job's energy at the
forecast's mean over its run where the same queue estimate runs it, not at the window it
was deferred to (jobs deferred into one trough run past it; ``_queued_intensity``). The
plan taken is the best on the objective among those within the budget, held no tighter
than the least carbon a candidate reaches plus ``budget_slack`` x the reference (at a budget
of at least 1 found without scoring every candidate: by lower bounds on the objective, the
same plan, see ``_solve``). Hence two
guarantees, per decision (not for a whole run, see docs/policies.md):
at a budget of at least 1 the plan is never worse than the carbon-agnostic one on the
objective (that plan is a candidate and fits), and a looser budget never gives a worse
expected JCT among budgets on the same side of 1 (there the candidates do not depend on
the budget, a looser one only admits more; below 1 a cap at the requested size is
exempt from the GPU-time guard, ``_guard``, so a budget just under 1 has more
candidates than 1 itself). With ``budget_fraction=None`` the fixed ``price`` is used, which is how a
frontier is swept.

Extension points: the runtime of a configuration comes from one function
(``_runtime``); layer freezing (IceFrog) is not there (a pending job has frozen
nothing) but where running jobs are resized (``policy/running.py``); co-location is
one more candidate for the jobs a plan does not start now (``colocation``,
``policy/priced_sharing.py``): the GPU of a one-GPU job running or starting now, taken
where that costs less than the plan, carried to the Prolog by ``JobDecision.share_with``.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np

from slurm_green.core.cluster import ClusterSnapshot, Job, JobState, Node
from slurm_green.core.decision import DecisionContext, DecisionMemo
from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.partitions import node_rules
from slurm_green.core.plan import JobDecision, Plan, Price
from slurm_green.policy.eaco import named_partner
from slurm_green.policy.config_table import ConfigTable, cap_choices, config_table, gpu_options, layout
from slurm_green.policy.pending import PendingJobs, gpus_per_node_of, pending_jobs
from slurm_green.policy.gpu_types import gpu_pools
from slurm_green.policy.managed import released_as_started
from slurm_green.policy.placement import FreeGpus, node_rows
from slurm_green.policy.placement.network import NodeChooser
from slurm_green.policy.placement.site import ScoredChoice
from slurm_green.policy.priced_sharing import Colocation, Planned, share_where_cheaper
from slurm_green.policy.placement import gpus_free as placement_gpus_free

_J_PER_KWH = 3.6e6
#: The price grid: the scale guess (reference runtime / reference carbon) times 2**k for these k.
_PRICE_STEPS = range(-8, 17)
#: ``_choose_walk`` prices this many cost entries (prices x jobs x columns x starts x caps) at once at most.
_CHOOSE_BLOCK_ELEMENTS = 1 << 16


@dataclass(frozen=True)
class _Where:
    """Where each pending job of a pool may run (``core.partitions``, the planner's rule): per
    row, the pool's nodes it is held to (None: all of them, the usual case of one partition)
    and the GPUs per node its sizes are laid out in (its allowed nodes' most common count; the
    pool's where it is held to none). Its sizes and pins then fit its partition, and
    ``planner.within_partition`` has nothing to drop."""

    allowed: tuple[frozenset[str] | None, ...]
    gpn: tuple[int, ...]
    #: Per allowed set: (the FreeGpus names it was read against, which of them it allows).
    masks: dict[frozenset[str], tuple[tuple[str, ...], np.ndarray]]

    @classmethod
    def anywhere(cls, n: int, gpn: int) -> _Where:
        return cls((None,) * n, (gpn,) * n, {})

    @classmethod
    def of(cls, jobs: PendingJobs, snapshot: ClusterSnapshot, pool: ClusterSnapshot, gpu: str | None, gpn: int,
           memo: DecisionMemo) -> _Where:
        """``jobs``' rows in ``pool`` (``snapshot`` itself, or its nodes of GPU type ``gpu``), whose
        most common GPUs per node is ``gpn``."""
        rules = node_rules(snapshot, memo)  # the whole cluster's: partitions name nodes of every type
        among = rules.names if pool is snapshot else rules.of_type(gpu)
        narrowed: dict[frozenset[str] | None, tuple[frozenset[str] | None, int]] = {}
        allowed, gpns = [], []
        for job in jobs.jobs:
            wanted = rules.allowed(job)
            held = narrowed.get(wanted)
            if held is None:
                inside = None if wanted is None or wanted >= among else wanted & among
                held = narrowed[wanted] = (inside, gpn if inside is None else rules.gpus_per_node(inside) or gpn)
            allowed.append(held[0])
            gpns.append(held[1])
        return cls(tuple(allowed), tuple(gpns), {})

    def mask(self, row: int, names: tuple[str, ...]) -> np.ndarray | None:
        """Which of ``names`` (a ``FreeGpus``'s nodes) row ``row`` may be placed on (None: all)."""
        allowed = self.allowed[row]
        if allowed is None:
            return None
        held = self.masks.get(allowed)
        if held is None or held[0] is not names:
            held = self.masks[allowed] = (names, np.fromiter((name in allowed for name in names), dtype=bool,
                                                             count=len(names)))
        return held[1]


@dataclass(frozen=True)
class _Options:
    """The candidate space of one decision: jobs x GPU columns x caps, plus two starts."""

    runtime: np.ndarray  #: [N, G, C] seconds, inf where not allowed
    energy_kwh: np.ndarray  #: [N, G, C]
    intensity: np.ndarray  #: [N, 2] budget units per kWh at start now / deferred
    wait: np.ndarray  #: [N, 2] seconds
    chain: np.ndarray  #: [N, M] allowed GPU columns ascending, -1 padded
    gpus: np.ndarray  #: [G] GPU count of each column
    requested_col: np.ndarray  #: [N]
    full_cap: int  #: index of cap 1.0
    #: The forecast a plan's spend is read from over each job's expected run (``_queued_intensity``);
    #: None where the spend does not depend on when a job runs (energy, or no forecast).
    forecast: CarbonForecast | None
    now: float  #: the decision's time, epoch seconds (the queue estimate counts from it)
    where: _Where  #: the nodes each job may be placed on and the GPUs per node it is laid out in

    # Price-independent parts of ``_choose``, computed once per decision (not once per price).

    @cached_property
    def rows(self) -> np.ndarray:
        return np.arange(self.runtime.shape[0])

    @cached_property
    def starts(self) -> int:
        """S: 2 (now, deferred), or 1 ("now" only) when no job can defer."""
        return 2 if bool(np.isfinite(self.wait[:, 1]).any()) else 1

    @cached_property
    def base_cost(self) -> np.ndarray:
        """wait + runtime, [N, G, S, C]: caps last, so the per-cap minimum reads contiguous memory."""
        return self.wait[:, None, : self.starts, None] + self.runtime[:, :, None, :]

    @cached_property
    def sizes(self) -> list[int]:
        """Each job's smallest allowed GPU count, as Python ints for ``_admit``'s loop."""
        return self.gpus[self.chain[:, 0]].tolist()

    @cached_property
    def queued_col(self) -> np.ndarray:
        """The column of a job that does not start now (queued or deferred): its request where
        allowed, else its smallest.

        Slurm starts such a job later, between ticks, at whatever size it carries, so a size
        chosen now would be enacted without the increments that were to follow it; and the
        size it carries is all the next tick sees of its request, so a shrink decided for a
        job that does not start would become its new request, tick after tick (issue 10).
        """
        allowed = np.isfinite(self.runtime[self.rows, self.requested_col, self.full_cap])
        return np.where(allowed, self.requested_col, self.chain[:, 0])

    @cached_property
    def plain_col(self) -> np.ndarray:
        """The column the carbon-agnostic plan runs each job at (full power): its request where
        allowed, else the allowed size closest to it (the smaller of two as close), else (none
        allowed at full power, which no monotone model gives) its request.

        The request is outside what a job allows when it lies outside its own ``gpus=MIN-MAX``;
        a plan running it there would score inf, and with it the objective every plan is compared
        with (``_least_change`` leaves every job an allowed configuration at full power).
        """
        allowed = np.isfinite(self.runtime[:, :, self.full_cap])
        if bool(allowed[self.rows, self.requested_col].all()):
            return self.requested_col
        requested = self.gpus[self.requested_col]
        dist = np.where(allowed, np.abs(self.gpus[None, :] - requested[:, None]), np.iinfo(np.int64).max)
        return np.where(allowed.any(axis=1), dist.argmin(axis=1), self.requested_col)

    @cached_property
    def carbon_floor(self) -> float:
        """The least any plan can spend: each job in its least-carbon allowed configuration and start."""
        energy = np.where(np.isfinite(self.runtime), self.energy_kwh, np.inf)
        return float((energy[:, :, None, :] * self.intensity[:, None, : self.starts, None]).min(axis=(1, 2, 3)).sum())

    @cached_property
    def priced(self) -> tuple[np.ndarray, np.ndarray]:
        """(energy, intensity), each [N, G, S, C] and contiguous: the operands of the priced carbon,
        spelled out so that pricing them is elementwise (a broadcast over the short cap axis is
        several times slower)."""
        shape = self.base_cost.shape
        return (np.ascontiguousarray(np.broadcast_to(self.energy_kwh[:, :, None, :], shape)),
                np.ascontiguousarray(np.broadcast_to(self.intensity[:, None, : self.starts, None], shape)))

    @cached_property
    def fastest(self) -> tuple[np.ndarray, np.ndarray]:
        """Per job and cap [N, C]: the least runtime and the least GPU-seconds over all columns."""
        return self.runtime.min(axis=1), (self.gpus[None, :, None] * self.runtime).min(axis=1)

    @cached_property
    def cap_offsets(self) -> np.ndarray:
        """Flat index of cap 0 of each (job, column, start) in a [N, G, S, C] array."""
        n, g, s, c = self.base_cost.shape
        return np.arange(0, n * g * s * c, c).reshape(n, g, s)

    @cached_property
    def step_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per job and chain step: (from and to column as flat indices into a [N, G, S] array's
        "now" entries (to: column 0 where there is no step), step exists, extra GPUs)."""
        here, there = self.chain[:, :-1], self.chain[:, 1:]
        valid = there >= 0
        safe_there = np.where(valid, there, 0)
        extra = np.where(valid, self.gpus[safe_there] - self.gpus[here], 1)
        row_base = self.rows[:, None] * len(self.gpus)
        return (row_base + here) * self.starts, (row_base + safe_there) * self.starts, valid, extra


@dataclass(frozen=True)
class _Choice:
    col: np.ndarray
    cap: np.ndarray
    start: np.ndarray  #: 0 now, 1 deferred
    admitted: np.ndarray
    spent: float


#: A candidate plan as enacted: (choice, row -> (GPU column, nodes) of the jobs starting now, the key
#: its score is kept under, its price or None for the carbon-agnostic plan).
_Candidate = tuple[_Choice, dict[int, tuple[int, tuple[str, ...]]], bytes, float | None]


@dataclass(frozen=True)
class Solution:
    """The plan a decision takes and why: its objective, the carbon-agnostic plan's, the budget."""

    choice: _Choice  #: as enacted: admitted jobs are the ones placed, the others queue at their request
    placed: dict[int, tuple[int, tuple[str, ...]]]  #: row -> (GPU column, nodes) of the jobs starting now
    price: float
    #: The objective (``_expected_cost_s``) of this plan and of the carbon-agnostic one.
    expected_cost_s: float
    agnostic_cost_s: float
    budget: float  #: inf with a fixed price
    reference: float  #: the carbon-agnostic plan's carbon (energy)
    note: str
    #: [N] budget units per kWh each job is expected to run at: the forecast's mean over its run
    #: as the queue estimate expects it (``_queued_intensity``), what the budget held it to.
    intensity: np.ndarray


@dataclass(frozen=True)
class _Scored:
    """What one enacted plan is judged by: its objective and its spend as queued."""

    cost_s: float  #: ``_expected_cost_s``
    spent: float  #: carbon (energy) with each job at ``intensity``
    intensity: np.ndarray  #: [N] see ``Solution.intensity``


@dataclass(frozen=True)
class GreenFlowPolicy:
    name: str = "greenflow"
    #: "carbon" (GreenFlow) or "energy" (PowerFlow).
    resource: Literal["carbon", "energy"] = "carbon"
    #: Plan budget as a fraction of the carbon-agnostic plan's carbon (energy); None = fixed price.
    budget_fraction: float | None = 1.0
    #: Seconds of JCT one kg CO2 (one kWh) is worth when ``budget_fraction`` is None.
    price: float = 0.0
    #: Power-cap candidates, fractions of the board limit; None: each GPU type's allowed caps
    #: (the registry's ``allowed_caps``: from the board's minimum or ``cap_floor``, whichever is
    #: higher, every ``cap_step``). The H100's energy per step is lowest at 0.36-0.5 of its board.
    caps: tuple[float, ...] | None = None
    cap_floor: float = 0.3
    cap_step: float = 0.1
    #: Plan each GPU type as its own pool (``gpu_pools``); False plans the whole cluster with the
    #: registry's own type, as before clusters had types (the type-blind baseline).
    typed: bool = True
    #: Deferral candidates look this far ahead at most (and never past a job's deadline).
    max_defer_s: float = 48 * 3600.0
    default_runtime_s: float = 3600.0
    #: Pin jobs started now to nodes (network packing + buddy blocks).
    place: bool = True
    #: A site's placement weights (``placement/site.py``): one-node jobs go where the weighted
    #: plugins score best; empty: the fullest node with a fitting block.
    placement: tuple[tuple[str, float], ...] = ()
    # The guards (``_guard``; None turns one off): a configuration may hold at most
    # (1 + gpu_time_slack) x the GPU-seconds of the job's request at full power, run at most
    # (1 + runtime_slack) x as long, and exceed the requested GPU count only if it then runs
    # at most growth_horizon_s.
    gpu_time_slack: float | None = 0.1
    runtime_slack: float | None = 0.25
    growth_horizon_s: float | None = 2 * 3600.0
    #: A budget is held no tighter than the least carbon (energy) any candidate reaches plus this
    #: fraction of the carbon-agnostic plan's (``_solve``); 0: the budget as set, and the cheapest
    #: plan when none is within it. Differences that small are inside the forecast's and
    #: the models' error (forecast MAPE 9-31 % in DE-LU, GB, US-CAL-CISO; power 6 %), and chasing
    #: them cost hours: on 168 generated workloads budget 0.6 gave over twice FIFO's JCT in 59
    #: of them with the exact budget, in 18 with 0.05 (docs/policies.md, "Near the least carbon").
    budget_slack: float = 0.05
    #: Co-location as one more candidate (``policy/priced_sharing.py``); None: never shares.
    colocation: Colocation | None = None

    def __call__(self, context: DecisionContext) -> Plan:
        snapshot, memo, now = context.snapshot, context.memo, context.now
        jobs = pending_jobs(snapshot, self.default_runtime_s, memo)
        if not len(jobs):
            return Plan()
        if self.resource == "carbon" and context.forecast is None:
            return _carbon_agnostic(jobs, now)
        pools = gpu_pools(snapshot, memo) if self.typed else [(None, snapshot)]
        decisions: list[JobDecision] = []
        notes = []
        prices = []
        for gpu, pool in pools:
            pool_jobs = jobs if pool is snapshot else pending_jobs(pool, self.default_runtime_s, memo)
            if not len(pool_jobs):
                continue
            gpn, gpus_free, gpus_total = _node_facts(pool, memo)
            where = _Where.of(pool_jobs, snapshot, pool, gpu, gpn, memo)
            options, caps = self._options(pool_jobs, context, gpn, gpu, where)
            queue = _Queue(gpus_free, gpus_total, running_releases(pool, now, memo))
            solved = self._solve(options, gpus_free, queue, pool, memo, context.budget_scale,
                                 self._chooser(pool, context, gpu))
            decided = list(self._decisions(pool_jobs, options, caps, solved, now, gpu))
            decisions += self._share(pool_jobs, options, solved, queue, pool, context, gpu, decided)
            notes.append(solved.note if len(pools) == 1 else f"{gpu}: {solved.note}")
            # The price a running job is weighed by (``policy/running.py``): only a budget asking
            # for less than the carbon-agnostic plan spends makes a unit of it worth time.
            binding = self.budget_fraction is None or solved.budget < solved.reference
            prices.append((gpu, Price(solved.price if binding else 0.0, self.resource)))
        return Plan(decisions=tuple(decisions), notes=tuple(notes), prices=tuple(prices))

    def _share(self, jobs: PendingJobs, o: _Options, solved: Solution, queue: _Queue,
               pool: ClusterSnapshot, context: DecisionContext, gpu: str | None,
               decided: list[JobDecision]) -> list[JobDecision]:
        """``decided`` with co-location where it costs less than the plan (``policy/priced_sharing.py``),
        if the site enabled it and a job allows sharing: each job's planned cost is read off the
        plan's own objective (its completion in the queue estimate, its priced carbon, its GPU-seconds)."""
        if self.colocation is None or not any(options.accept_share for options in jobs.options):
            return decided
        choice, rows = solved.choice, o.rows
        ends = [0.0] * len(rows)
        _expected_completion_s(o, choice, queue.free_gpus, queue.releases, ends)
        crowd = int((~_agnostic_choice(o, queue.free_gpus).admitted).sum())
        per_gpu_s = crowd / max(queue.gpus_total, 1)
        runtime = o.runtime[rows, choice.col, choice.cap]
        energy = o.energy_kwh[rows, choice.col, choice.cap]
        gpus = o.gpus[choice.col]
        cost = np.asarray(ends) + solved.price * energy * o.intensity[rows, choice.start] + per_gpu_s * gpus * runtime
        one_gpu = (jobs.gpus == 1) & (gpus == 1)
        starting = choice.admitted & (choice.start == 0)
        solo = o.runtime[rows, o.requested_col, o.full_cap]
        planned = [Planned(job, options.accept_share, bool(accept), bool(now), bool(one), float(r), float(e), float(k),
                           float(alone), float(ci), solved.placed[j][1] if j in solved.placed else None,
                           o.where.allowed[j])
                   for j, (job, options, accept, now, one, r, e, k, alone, ci) in enumerate(zip(
                       jobs.jobs, jobs.options, jobs.accept_cap, starting, one_gpu, runtime, energy, cost, solo,
                       o.intensity[:, 0]))]
        return share_where_cheaper(planned, decided, pool, context.models, gpu, context.now, solved.price, per_gpu_s,
                                   self.colocation, self.resource == "carbon")

    def solve(self, context: DecisionContext) -> Solution | None:
        """The decision's plan before placement, with its objective (None without pending jobs);
        on a cluster of one GPU type (of several, the first pool's)."""
        memo, now = context.memo, context.now
        gpu, pool = gpu_pools(context.snapshot, memo)[0] if self.typed else (None, context.snapshot)
        jobs = pending_jobs(pool, self.default_runtime_s, memo)
        if not len(jobs):
            return None
        gpn, gpus_free, gpus_total = _node_facts(pool, memo)
        options, _ = self._options(jobs, context, gpn, gpu, _Where.of(jobs, context.snapshot, pool, gpu, gpn, memo))
        return self._solve(options, gpus_free, _Queue(gpus_free, gpus_total, running_releases(pool, now, memo)), pool,
                           memo, context.budget_scale, self._chooser(pool, context, gpu))

    def _chooser(self, pool: ClusterSnapshot, context: DecisionContext, gpu: str | None) -> NodeChooser | None:
        """The site's node choice for one-node jobs in ``pool`` (None: network placement's)."""
        if not self.placement or not self.place:
            return None
        return ScoredChoice.for_pool(dict(self.placement), pool, context.models, gpu)

    # -- candidate space ---------------------------------------------------------------

    def _options(self, jobs: PendingJobs, context: DecisionContext, gpn: int, gpu: str | None,
                 where: _Where | None = None) -> tuple[_Options, np.ndarray]:
        """The candidate space of ``jobs`` on GPU type ``gpu`` (in a pool of ``gpn`` GPUs per node;
        each job laid out as ``where`` says, None: the pool's way), and its cap axis."""
        where = where or _Where.anywhere(len(jobs), gpn)
        # Jobs share few (requested, low, high, GPUs per node) ranges: build each range's options once.
        ranges = list(zip(jobs.gpus.tolist(), jobs.gpus_min.tolist(), jobs.gpus_max.tolist(), where.gpn))
        distinct = {key: gpu_options(*key) for key in dict.fromkeys(ranges)}
        all_counts = {g for opts in distinct.values() for g in opts} | set(jobs.gpus.tolist())
        models = context.models
        caps = tuple(sorted(set(self.caps or cap_choices(models, gpu, floor=self.cap_floor, step=self.cap_step))
                            | {1.0}))
        table = config_table(models, set(jobs.job_type), all_counts, caps, gpn, gpu, context.memo)
        counts = table.gpus
        col_of = {int(g): i for i, g in enumerate(counts)}
        n, g_cols, c_cols = len(jobs), len(counts), len(table.caps)
        types = np.fromiter((table.type_index[t] for t in jobs.job_type), dtype=np.int64, count=n)
        width = max(len(o) for o in distinct.values())
        # One row of (allowed, chain) per distinct range, then gathered per job.
        range_of = {key: r for r, key in enumerate(distinct)}
        allowed_r = np.zeros((len(distinct), g_cols), dtype=bool)
        chain_r = np.full((len(distinct), width), -1, dtype=np.int64)
        for r, opts in enumerate(distinct.values()):
            cols = [col_of[g] for g in opts]
            allowed_r[r, cols] = True
            chain_r[r, : len(cols)] = cols
        which = np.fromiter((range_of[key] for key in ranges), dtype=np.int64, count=n)
        allowed, chain = allowed_r[which], chain_r[which]
        requested_col = np.fromiter((col_of[g] for g in jobs.gpus.tolist()), dtype=np.int64, count=n)
        full_cap = int(np.flatnonzero(table.caps == 1.0)[0])
        cap_ok = np.where(jobs.accept_cap[:, None], True, (np.arange(c_cols) == full_cap)[None, :])
        tput, power = _laid_out(table, types, jobs, where, gpn, context, gpu)  # [N, G, C] each
        rows = np.arange(n)
        asked_tput = tput[rows, requested_col, full_cap]
        work = jobs.runtime_s * asked_tput
        runtime = _runtime(work, tput)
        # Where the model gives the request no (finite, positive) throughput, the job's work is
        # unknown, so is every configuration's runtime: none is a candidate, and the request at
        # full power runs its runtime as asked by definition (``_least_change`` takes over).
        modelled = np.isfinite(asked_tput) & (asked_tput > 0)
        if not modelled.all():
            runtime[~modelled] = np.inf
            runtime[~modelled, requested_col[~modelled], full_cap] = jobs.runtime_s[~modelled]
        guard = self._guard(runtime, counts, jobs.gpus, requested_col, full_cap, self._asks_carbon(context.budget_scale))
        # A job's limit cannot be raised past its partition's MaxTime (a pending job over it would not
        # start), so Slurm would stop a job slowed further there: no configuration may run past it, the
        # request at full power excepted (``planner.within_max_time`` holds every policy to it).
        bound = np.maximum(jobs.max_runtime_s, runtime[rows, requested_col, full_cap])
        ok = (allowed[:, :, None] & cap_ok[:, None, :] & guard & ~(runtime > bound[:, None, None])
              & modelled[:, None, None])
        stuck = np.flatnonzero(~ok.any(axis=(1, 2)))
        if len(stuck):
            _least_change(stuck, runtime, ok, allowed, counts, jobs.gpus, jobs.runtime_s, modelled, full_cap)
        chain = _feasible_chain(chain, ok.any(axis=2))
        energy = power * runtime / _J_PER_KWH
        # Energy stays finite everywhere: the requested configuration at full power is the
        # carbon-agnostic reference even when the user's range excludes it. (Where a model gives
        # no throughput the runtime, and so the energy, is infinite: never a candidate, it is
        # kept finite so that a zero price times it is not NaN in ``_choose_walk``.)
        if not np.isfinite(energy).all():
            energy = np.where(np.isfinite(energy), energy, 0.0)
        runtime = np.where(ok, runtime, np.inf)
        intensity, wait = self._intensity(jobs, context.forecast, context.now, jobs.runtime_s)
        timed = context.forecast if self.resource == "carbon" else None
        return _Options(runtime, energy, intensity, wait, chain, counts, requested_col, full_cap, timed,
                        context.now, where), table.caps

    def _asks_carbon(self, budget_scale: float) -> bool:
        """Whether this decision is asked to spend less than the carbon-agnostic plan: a budget
        below 1 (after the period's pace), or a positive fixed price."""
        if self.budget_fraction is None:
            return self.price > 0
        return self.budget_fraction * budget_scale < 1.0

    def _guard(self, runtime: np.ndarray, counts: np.ndarray, requested: np.ndarray, requested_col: np.ndarray,
               full_cap: int, asks_carbon: bool) -> np.ndarray:
        """Configurations [N, G, C] that cannot make the cluster much slower than plain Slurm.

        The objective sees the jobs pending now; the jobs that arrive next pay for what it
        decides (issue 10, docs/policies.md). Measured on generated workloads, three kinds of
        decision did most of that harm, and each guard bounds one:

        - *more GPU-time than asked* (growth at poor scaling, caps that stretch a run): the
          jobs behind get fewer GPU-hours; held to ``gpu_time_slack``;
        - *a job made much slower* (a shrink or deep cap, to free GPUs for a queue that then
          clears anyway): held to ``runtime_slack``;
        - *a long job grown into an idle cluster*: it keeps the extra GPUs for its whole run
          (no running job is resized), and everyone arriving meanwhile queues behind it;
          growth only for runs of at most ``growth_horizon_s``.

        The requested configuration at full power always passes. When the decision is asked
        for less carbon than the carbon-agnostic plan (``asks_carbon``), a power cap at the
        requested GPU count is bounded by ``runtime_slack`` alone: capping is the lever that
        buys carbon with the least JCT (Zeus's), and its GPU-time grows exactly as its run
        time does. Held to ``gpu_time_slack`` too, a 0.8 budget could not cap a job 12 %
        slower and deferred instead (Philly, 200 jobs: 1.26 x FIFO's JCT at 0.79 of its
        carbon, Zeus 1.12 x at 0.74; docs/policies.md, "The guards"). At budgets of 1 and
        more nothing changes: there such caps only gain on paper (10 generated workloads
        lost to FIFO with the exemption, 7 without).
        """
        as_asked = runtime[np.arange(len(runtime)), requested_col, full_cap][:, None, None]
        ok = np.ones(runtime.shape, dtype=bool)
        if self.gpu_time_slack is not None:
            held = counts[None, :, None] * runtime <= (1.0 + self.gpu_time_slack) * requested[:, None, None] * as_asked
            if asks_carbon:
                held |= counts[None, :, None] == requested[:, None, None]
            ok &= held
        if self.runtime_slack is not None:
            ok &= runtime <= (1.0 + self.runtime_slack) * as_asked
        if self.growth_horizon_s is not None:
            ok &= (counts[None, :, None] <= requested[:, None, None]) | (runtime <= self.growth_horizon_s)
        return ok

    def _intensity(self, jobs: PendingJobs, forecast: CarbonForecast | None, now: float,
                   runtime: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Budget units per kWh when starting now and in the best window before the deadline.

        Without a forecast (only ``solve`` gets here so: ``__call__`` then plans carbon-agnostically)
        the hour does not matter, as for energy."""
        n = len(jobs)
        wait = np.zeros((n, 2))
        if self.resource == "energy" or forecast is None:
            return np.ones((n, 2)), np.column_stack([wait[:, 0], np.full(n, np.inf)])
        starts = np.asarray(forecast.starts, dtype=np.float64)
        latest = np.minimum(jobs.deadline, now + self.max_defer_s)
        # The period starts in (now, latest deadline]: a slice, since starts increase.
        first, end = starts.searchsorted([now, latest.max(initial=now)], side="right")
        candidates = starts[first:end]
        # One window search for "now" (column 0) and every candidate start.
        window_means = forecast.window_means
        all_ci = window_means(np.concatenate(([now], candidates)), runtime) / 1000.0
        now_ci = all_ci[:, 0]
        if not len(candidates):
            return np.column_stack([now_ci, now_ci]), np.column_stack([wait[:, 0], np.full(n, np.inf)])
        ci = np.where(candidates[None, :] <= latest[:, None], all_ci[:, 1:], np.inf)
        best = ci.argmin(axis=1)
        best_ci = ci.min(axis=1)
        deferrable = np.isfinite(best_ci)
        defer_wait = np.where(deferrable, candidates[best] - now, np.inf)
        return np.column_stack([now_ci, np.where(deferrable, best_ci, now_ci)]), \
            np.column_stack([wait[:, 0], defer_wait])

    # -- one price ---------------------------------------------------------------------

    def _choose(self, o: _Options, price: float, free_gpus: int) -> _Choice:
        return self._choose_walk(o, [price], free_gpus, -math.inf)[0][0]

    def _choose_walk(self, o: _Options, prices: list[float], free_gpus: int,
                     floor: float) -> list[tuple[_Choice, float]]:
        """The greedy plan at each of ``prices`` in turn, up to and including the first that spends
        no more than ``floor``, each distinct plan once, with the first price giving it.

        The price-dependent arrays are computed for a block of prices at once ([P, N, G, S, C]:
        the same elementwise arithmetic per price, so the same plans as one price at a time);
        blocks are small enough to keep the memory bounded, and the walk stops at ``floor`` as
        a price-by-price walk would (a plan repeated spends what it spent before, more than
        ``floor``). Most prices repeat a plan: a one-job queue has a few distinct plans in 26.
        """
        rows = o.rows
        energy, intensity = o.priced
        base = o.base_cost
        per_price = base.size
        block = max(1, min(len(prices), _CHOOSE_BLOCK_ELEMENTS // max(per_price, 1)))
        sizes, queued_col, chain = o.sizes, o.queued_col, o.chain
        plans: list[tuple[_Choice, float]] = []
        seen: set[bytes] = set()
        # Most prices want the same jobs now: each distinct set is admitted once (per walk: on a
        # long queue a block holds one price).
        admits: dict[tuple[bool, ...], tuple[list[bool], int]] = {}
        for first in range(0, len(prices), block):
            chunk = np.asarray(prices[first:first + block], dtype=np.float64)
            # cost[P, N, G, S, C]; non-allowed configurations and impossible deferrals are inf. S is
            # only "now" when no job can defer (every deferred cost would be inf). Same arithmetic, in
            # the same order, as (wait + runtime) + (price * energy) * intensity.
            cost = np.multiply(chunk[:, None, None, None, None], energy)
            cost *= intensity
            cost += base
            cap_best = cost.argmin(axis=4)  # [P, N, G, S]
            # The minimum over caps is the value at the argmin (no NaN can arise: energy and
            # intensity are finite); gathering it is cheaper than a second reduction.
            offsets = (np.arange(len(chunk)) * per_price)[:, None, None, None] + o.cap_offsets
            cost_gs = cost.reshape(-1)[offsets + cap_best]  # [P, N, G, S]
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
                plans.append((_Choice(col[k], cap[k], start[k], admitted[k], spent), prices[first + k]))
                if spent <= floor:
                    return plans
        return plans

    def _solve(self, o: _Options, free_gpus: int, queue: _Queue, snapshot: ClusterSnapshot,
               memo: DecisionMemo, budget_scale: float, choose: NodeChooser | None) -> Solution:
        unit = "kg CO2" if self.resource == "carbon" else "kWh"
        agnostic = _agnostic_choice(o, free_gpus)
        # Jobs the carbon-agnostic plan leaves queued: the crowd that every GPU-second a plan
        # adds makes wait longer, including the jobs that will arrive behind them.
        crowd = int((~agnostic.admitted).sum())
        seen: dict[bytes, tuple[_Choice, dict[int, tuple[int, tuple[str, ...]]]]] = {}
        places: dict[bytes, dict[int, tuple[int, tuple[str, ...]]]] = {}
        scores: dict[bytes, _Scored] = {}
        queued: dict[bytes, _Choice] = {}

        def enacted(choice: _Choice) -> tuple[_Choice, dict[int, tuple[int, tuple[str, ...]]], bytes]:
            """The plan as it will be enacted (after placement), its nodes and its key for
            ``objective``; each distinct plan is enacted once, and placed once per distinct sizes
            and starts (caps do not move a placement: plans that differ only in caps share it)."""
            key = _key(choice)
            shape = key[:len(key) // 4 * 3]
            if key not in seen:
                placed_choice, placed = self._enact(choice, o, snapshot, memo, choose, places.get(shape))
                places[shape] = placed
                seen[key] = (placed_choice, placed)
            return (*seen[key], key)

        def scored(key: bytes) -> _Scored:
            """The enacted plan's objective and spend, scored once per distinct plan and only when
            asked: the queue estimate is the costliest part. Where the spend does not depend on
            when jobs run (``o.forecast`` None) it is known unscored, and the plans that cannot
            be taken are never scored."""
            value = scores.get(key)
            if value is None:
                value = scores[key] = _score(o, seen[key][0], queue, crowd)
            return value

        def objective(key: bytes) -> float:
            return scored(key).cost_s

        def as_queued(choice: _Choice, key: bytes) -> _Choice:
            """``choice`` with the spend it is budgeted by: each job's carbon over its expected run."""
            if o.forecast is None:
                return choice
            held = queued.get(key)
            if held is None:
                held = queued[key] = _Choice(choice.col, choice.cap, choice.start, choice.admitted, scored(key).spent)
            return held

        def solution(choice: _Choice, placed: dict[int, tuple[int, tuple[str, ...]]], key: bytes, price: float,
                     budget: float, note: str) -> Solution:
            return Solution(choice, placed, price, objective(key), agnostic_s, budget, agnostic.spent, note,
                            scored(key).intensity)

        agnostic, agnostic_nodes, agnostic_key = enacted(agnostic)
        agnostic = as_queued(agnostic, agnostic_key)
        agnostic_s = objective(agnostic_key)
        if self.budget_fraction is None:
            choice, placed, key = enacted(self._choose(o, self.price, free_gpus))
            choice = as_queued(choice, key)
            note = f"{self.name}: fixed price {self.price:.3g} s/{unit}, plan {choice.spent:.3g} {unit}"
            return solution(choice, placed, key, self.price, math.inf, note)
        fraction = self.budget_fraction * budget_scale  # a budget per period paces it (controller/budget.py)
        budget = fraction * agnostic.spent
        # (choice, nodes, key of its objective, price or None for the carbon-agnostic plan) by
        # index, as enacted: the candidates depend on the budget only through the guard's side of
        # 1 (``_asks_carbon``), which is what makes a looser budget on the same side no worse.
        grid = self._price_grid(o, free_gpus)
        first: _Candidate = (agnostic, agnostic_nodes, agnostic_key, None)
        entries: dict[int, _Candidate]
        best: tuple[float, float, int] | None
        if budget >= agnostic.spent:
            # Held to the budget itself (the slack below cannot loosen it past the reference). The
            # carbon-agnostic plan fits, so a plan that cannot beat it, however it is enacted
            # (``_enactment_lower_bound_s``), is never placed; the others are scored in the order
            # of a lower bound on their objective, and once the bound exceeds the best found none
            # after it can win. The plan taken is the one enacting and scoring every candidate
            # would take (docs/policies.md, "Searching the candidates by a bound").
            held_to, best = budget, (agnostic_s, agnostic.spent, 0)
            beaten = agnostic_s * (1 + 1e-9) + 1e-6
            entries = {0: first}
            for i, (c, p) in enumerate(grid, 1):
                if _enactment_lower_bound_s(o, c, queue, crowd) <= beaten:
                    entries[i] = (*enacted(c), p)
            order = self._by_bound(o, entries, queue, crowd)
        else:
            # Held no tighter than the least carbon a candidate reaches plus ``budget_slack`` x the
            # reference (nor, by that, looser than the reference): monotone in the budget, so a
            # looser one is still never worse; and some candidate, the cheapest at least, always
            # fits. The least needs every candidate's spend as queued: all are scored.
            entries = dict([(0, first)] + [(i, (*enacted(c), p)) for i, (c, p) in enumerate(grid, 1)])
            least = min(as_queued(c, k).spent for c, _, k, _ in entries.values())
            held_to, best = max(budget, min(least + self.budget_slack * agnostic.spent, agnostic.spent)), None
            order = [(0.0, i) for i in entries]
        # The best objective within ``held_to``; ties: less carbon, then the earlier candidate.
        for bound, i in order:
            if best is not None and bound > best[0] * (1 + 1e-9) + 1e-6:
                break
            c, _, k, _ = entries[i]
            spent = as_queued(c, k).spent
            if spent <= held_to * (1 + 1e-9):
                best = min(best or (math.inf, math.inf, i), (objective(k), spent, i))
        assert best is not None  # the cheapest candidate always fits
        choice, placed, key, price = entries[best[2]]
        choice = as_queued(choice, key)
        held = "holds" if choice.spent <= budget * (1 + 1e-9) else (
            f"cannot hold (held to the least carbon a plan reaches + {self.budget_slack:g} x carbon-agnostic)")
        objective_s = objective(key)
        how = "the carbon-agnostic plan" if price is None else f"price {price:.3g} s/{unit}"
        note = (f"{self.name}: budget {budget:.3g} {unit} ({fraction:g} x carbon-agnostic "
                f"{agnostic.spent:.3g}) {held}; plan {choice.spent:.3g} {unit} at {how}, expected cost "
                f"{objective_s / 3600:.3g} h (carbon-agnostic {agnostic_s / 3600:.3g} h)")
        return solution(choice, placed, key, price or 0.0, budget, note)

    @staticmethod
    def _by_bound(o: _Options, entries: dict[int, _Candidate], queue: _Queue, crowd: int) -> list[tuple[float, int]]:
        """(lower bound on the objective, index) of each enacted candidate, ascending (ties: by index)."""
        return sorted((_cost_lower_bound_s(o, c, queue, crowd), i) for i, (c, _, _, _) in entries.items())

    def _price_grid(self, o: _Options, free_gpus: int) -> list[tuple[_Choice, float]]:
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
        return self._choose_walk(o, prices, free_gpus, floor)

    # -- placement and output ----------------------------------------------------------

    def _enact(self, choice: _Choice, o: _Options, snapshot: ClusterSnapshot, memo: DecisionMemo,
               choose: NodeChooser | None, placed: dict[int, tuple[int, tuple[str, ...]]] | None = None,
               ) -> tuple[_Choice, dict[int, tuple[int, tuple[str, ...]]]]:
        """``choice`` as it will run: admitted jobs get nodes (``_placement``, or ``placed`` if
        these sizes and starts were placed already); one that does not fit queues at its
        requested size like any job not starting now. Its spend is recounted, so the budget is
        held by what is enacted, not by what was hoped."""
        starting = choice.admitted & (choice.start == 0)
        if not self.place or not starting.any():
            return choice, {}
        if placed is None:
            placed = self._placement(choice, o, FreeGpus.from_snapshot(snapshot, memo), choose)
        if len(placed) == int(starting.sum()) and all(choice.col[j] == c for j, (c, _) in placed.items()):
            # Every job starting now was placed at its chosen size: the plan is enacted as chosen
            # (the same columns, its admitted jobs are the ones starting now, and its spend, summed
            # the same way over the same configurations, is the one recounted below).
            return _Choice(choice.col, choice.cap, choice.start, starting, choice.spent), placed
        now_placed = np.zeros(len(o.rows), dtype=bool)
        now_placed[list(placed)] = True
        col = np.where(starting & ~now_placed, o.queued_col, choice.col)
        for j, (c, _) in placed.items():
            col[j] = c
        rows = o.rows
        spent = float((o.energy_kwh[rows, col, choice.cap] * o.intensity[rows, choice.start]).sum())
        return _Choice(col, choice.cap, choice.start, now_placed, spent), placed

    def _placement(self, choice: _Choice, o: _Options, free: FreeGpus,
                   choose: NodeChooser | None) -> dict[int, tuple[int, tuple[str, ...]]]:
        """Nodes for admitted jobs, largest first (a one-node job's by ``choose`` if the site set one),
        each among the nodes its partition allows, laid out in their GPUs per node (``_Where``).

        A job whose chosen size does not fit the free GPUs' shape (fragmentation) steps down
        its chain, but never below the smaller of its chosen and its requested size: shrinking
        further to fit a hole made a 671-hour Philly job run 1,238 hours on half its GPUs
        (issue 10). A job that does not fit is not started; it queues at its requested size.
        """
        placed: dict[int, tuple[int, tuple[str, ...]]] = {}
        admitted = np.flatnonzero(choice.admitted & (choice.start == 0))
        order = admitted[np.argsort(-o.gpus[choice.col[admitted]], kind="stable")]
        gpus, chosen, chains = o.gpus.tolist(), choice.col.tolist(), o.chain[order].tolist()
        requested = o.requested_col.tolist()
        for j, chain in zip(order.tolist(), chains):
            top = gpus[chosen[j]]
            least = min(top, gpus[requested[j]])
            fitting = [c for c in chain if 0 <= c and least <= gpus[c] <= top]
            allowed = o.where.mask(j, free.names)
            for col in reversed(fitting):
                shape = layout(gpus[col], o.where.gpn[j])
                nodes = free.place(*shape, choose=choose, allowed=allowed) if shape else None
                if nodes is not None:
                    placed[j] = (col, nodes)
                    break
        return placed

    def _decisions(self, jobs: PendingJobs, o: _Options, cap_axis: np.ndarray, solved: Solution,
                   now: float, gpu: str | None) -> tuple[JobDecision, ...]:
        choice, placed, price = solved.choice, solved.placed, solved.price
        n = len(jobs)
        rows = np.arange(n)
        col = choice.col
        cap = choice.cap
        runtime = o.runtime[rows, col, cap]
        energy = o.energy_kwh[rows, col, cap]
        start_at = np.where(choice.start == 1, now + o.wait[rows, 1], now)
        # The reason names the start's window mean for the runtime at the requested size; the
        # expected carbon is what the budget held the job to: its mean over its expected run.
        ci_start = o.intensity[rows, choice.start] * 1000.0
        ci_run = solved.intensity  # budget units per kWh
        ci_now = o.intensity[:, 0] * 1000.0
        caps = cap_axis[cap]
        counts = o.gpus[col]
        carbon = self.resource == "carbon"
        # Plain Python numbers for the per-job loop (numpy scalars are slow to index and format);
        # float64 -> float is exact, so the decisions are the same.
        counts_l, caps_l, accept_l = counts.tolist(), caps.tolist(), jobs.accept_cap.tolist()
        start_l, start_at_l = choice.start.tolist(), start_at.tolist()
        runtime_l, energy_l = runtime.tolist(), energy.tolist()
        asked_l = o.energy_kwh[rows, o.requested_col, o.full_cap].tolist()
        ci_start_l, ci_run_l, ci_now_l = ci_start.tolist(), ci_run.tolist(), ci_now.tolist()
        ids = jobs.job_id.tolist()
        price_note = f" (price {price:.3g})"
        on = f" {gpu}" if gpu else ""
        shapes: dict[tuple[int, int], tuple[int, int]] = {}
        gpns = o.where.gpn
        sizes: dict[tuple[int, float], str] = {}
        out = []
        for j in range(n):
            g = counts_l[j]
            shape = shapes.get((g, gpns[j]))
            if shape is None:
                shape = shapes[(g, gpns[j])] = layout(g, gpns[j]) or (g, 1)
            per_node, nodes = shape
            cap_f = caps_l[j]
            size = sizes.get((g, cap_f))
            if size is None:
                size = sizes[(g, cap_f)] = f": {g} GPU(s){on} at cap {cap_f:.0%}{price_note}"
            cap_j = cap_f if accept_l[j] else None
            where = placed.get(j)
            if start_l[j]:
                why = f"deferred {(start_at_l[j] - now) / 3600:.1f} h to {ci_start_l[j]:.0f} g/kWh"
            elif where is not None:
                why = f"start now on {len(where[1])} node(s)"
            else:
                why = "released now, queued at its requested size"
            e = energy_l[j]
            # A job not placed now loses any pin an earlier tick gave it (an empty node list
            # clears ReqNodeList), or it would wait for nodes that were meant for another time.
            out.append(JobDecision(
                ids[j], start_at=start_at_l[j], gpus_per_node=per_node, num_nodes=nodes,
                nodes=where[1] if where is not None else (() if jobs.jobs[j].nodes else None),
                power_cap_fraction=cap_j,
                reason=why + size,
                expected_runtime_s=runtime_l[j], expected_energy_kwh=e,
                expected_carbon_kg=e * ci_run_l[j] if carbon else None,
                carbon_if_now_kg=e * ci_now_l[j] / 1000.0 if carbon else None,
                energy_as_asked_kwh=asked_l[j], gpu_type=gpu,
            ))
        return tuple(out)


@dataclass
class _NodeFactsMemo:
    """(node tuple, (GPUs per node, free GPUs, usable GPUs)) of the last snapshot, in a
    controller's memo: all three depend on the nodes only, which a simulator hands over as
    the same tuple while none changed (the held reference keeps the identity check sound)."""

    last: tuple[tuple[Node, ...], tuple[int, int, int]] | None = None


def _node_facts(snapshot: ClusterSnapshot, memo: DecisionMemo) -> tuple[int, int, int]:
    """(GPUs per node, free GPUs, usable GPUs) of the snapshot's nodes."""
    held = memo.get(_NodeFactsMemo)
    if held.last is None or held.last[0] is not snapshot.nodes:
        rows = node_rows(snapshot.nodes, memo)
        usable = sum([row[1] for row in rows if row[0]])
        held.last = (snapshot.nodes, (gpus_per_node_of(snapshot, memo), placement_gpus_free(snapshot.nodes, memo),
                                      usable))
    return held.last[1]


def _laid_out(table: ConfigTable, types: np.ndarray, jobs: PendingJobs, where: _Where, gpn: int,
              context: DecisionContext, gpu: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Throughput and power [N, G, C] of each job on ``table``'s columns, a job laid out in
    other GPUs per node than the pool's (``where``) read from a table of its own layout."""
    tput, power = table.throughput[types], table.power_w[types]
    others = sorted({g for g in where.gpn if g != gpn})
    for other in others:
        rows = np.flatnonzero(np.asarray(where.gpn) == other)
        kinds = [jobs.job_type[r] for r in rows.tolist()]
        own = config_table(context.models, set(kinds), set(table.gpus.tolist()), tuple(table.caps.tolist()), other,
                           gpu, context.memo)
        cols = np.searchsorted(own.gpus, table.gpus)
        at = np.fromiter((own.type_index[t] for t in kinds), dtype=np.int64, count=len(kinds))
        tput[rows] = own.throughput[at][:, cols]
        power[rows] = own.power_w[at][:, cols]
    return tput, power


def _least_change(stuck: np.ndarray, runtime: np.ndarray, ok: np.ndarray, allowed: np.ndarray, counts: np.ndarray,
                  requested: np.ndarray, runtime_s: np.ndarray, modelled: np.ndarray, full_cap: int) -> None:
    """Give each row of ``stuck`` (no configuration allowed) its least change, in place in
    ``runtime`` (before masking) and ``ok``: the GPU count of its range closest to its request
    (the request itself when the range holds it; the smaller of two as close), at full power.

    Rows get stuck when the request lies outside the job's own ``gpus=MIN-MAX`` (job_submit.lua
    does not check the two: ``--gres=gpu:4 --comment green:gpus=1-2``) and every size in the
    range fails a guard, or when the model cannot run the job (``modelled``). Such a row used to
    be all inf: the job started at whatever cap an argmin over infinities took (the lowest) with
    an infinite expected runtime (so its time limit was never raised and Slurm killed it at the
    old one), and every plan of its pool scored inf, so the objective no longer chose. The
    guards keep the policy from choosing costly changes; this is the least change the range
    allows, and full power is always allowed, so it is exempt from them (and from the
    partition's MaxTime: ``planner.within_max_time`` enacts a decision that would outrun it as
    asked). Its runtime is the model's; where the model cannot tell, the runtime as asked
    stretched as if the job scaled linearly when it shrinks (an upper bound for jobs that scale
    no better than linearly) and not sped up when it grows, so the limit raised for it is not short.
    """
    dist = np.where(allowed[stuck], np.abs(counts[None, :] - requested[stuck, None]), np.iinfo(np.int64).max)
    col = dist.argmin(axis=1)  # the first of the closest: counts ascend, so the smaller of a tie
    model = runtime[stuck, col, full_cap]
    bound = runtime_s[stuck] * np.maximum(1.0, requested[stuck] / counts[col])
    runtime[stuck, col, full_cap] = np.where(modelled[stuck] & np.isfinite(model), model, bound)
    ok[stuck, col, full_cap] = True


def _feasible_chain(chain: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """Each row's chain without the columns where no cap is allowed, left-aligned, -1 padded;
    a row left empty keeps its first column (none is: ``_least_change`` leaves every row one)."""
    rows = np.arange(len(chain))[:, None]
    valid = chain >= 0
    keep = valid & feasible[rows, np.maximum(chain, 0)]
    if np.array_equal(keep, valid):  # every column feasible (the usual case): the chain as it is
        return chain
    keep[:, 0] |= ~keep.any(axis=1)
    order = np.argsort(~keep, axis=1, kind="stable")
    return np.where(np.take_along_axis(keep, order, axis=1), np.take_along_axis(chain, order, axis=1), -1)


def _runtime(work: np.ndarray, throughput: np.ndarray) -> np.ndarray:
    """Seconds to do ``work`` at each configuration's throughput (the single place progress is modelled)."""
    with np.errstate(divide="ignore"):
        return np.where(throughput > 0, work[:, None, None] / np.where(throughput > 0, throughput, 1.0), np.inf)


def _admit(sizes: list[int], wants_now: Sequence[bool], free: int) -> tuple[list[bool], int]:
    """FIFO first-fit: each job wanting to start now takes ``sizes[j]`` GPUs if they are still free.

    Returns the admitted mask (a list) and the GPUs left. Admission stops as soon as no GPU is
    left (every size is at least 1): on a full cluster a long queue costs no pass. A plain loop:
    the queue is mostly a handful of jobs, for which numpy's per-call overhead dominates (and
    ``_choose`` runs this several times a tick).
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


def _increments(cost_gs: np.ndarray, o: _Options, admitted: np.ndarray, spare: np.ndarray) -> np.ndarray:
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


@dataclass
class _RunningMemo:
    """(job tuple, (EndTime or None, GPUs) of its running jobs with GPUs) of the last snapshot, in
    a controller's memo: a simulator hands over the same tuple while no job changed (the held
    reference keeps the identity check sound)."""

    last: tuple[tuple[Job, ...], list[tuple[float | None, int]]] | None = None


def running_releases(snapshot: ClusterSnapshot, now: float,
                     memo: DecisionMemo | None = None) -> list[tuple[float, int]]:
    """(seconds from now until it ends by its time limit, GPUs) of each running job, sorted
    (the order a heap of them pops in).

    What Slurm itself plans with: a running job's EndTime is its start plus its limit.
    A job past its limit (or without one) is taken to end now.
    """
    held = memo.get(_RunningMemo) if memo is not None else _RunningMemo()
    if held.last is None or held.last[0] is not snapshot.jobs:
        running = JobState.RUNNING
        ends: list[tuple[float | None, int]] = []
        shard_jobs = []
        for job in snapshot.jobs:  # one pass: a simulator's snapshot holds every active job, at every tick
            if job.state is running:
                gpus = job.num_nodes * job.gpus_per_node
                if gpus > 0:
                    ends.append((job.end_time, gpus))
                elif job.shards_per_node > 0 and not job.gpus_per_node:
                    shard_jobs.append(job)
        if shard_jobs:
            ends.extend(_shard_releases(shard_jobs))
        held.last = (snapshot.jobs, ends)
    out = [(max(0.0, (end if end is not None else now) - now), gpus) for end, gpus in held.last[1]]
    out.sort()
    return out


def _shard_releases(shard_jobs: list[Job]) -> list[tuple[float | None, int]]:
    """(EndTime, GPUs) of the GPUs running jobs hold on shards (co-located pairs): one GPU per
    node, freed when the last job on it ends; a pair is two jobs of the same nodes either of
    whose decision tokens names the other (``eaco``'s rule). A job without an EndTime counts
    as ending now, as in ``running_releases``."""
    by_id = {job.job_id: job for job in shard_jobs}
    group: dict[int, int] = {}
    for job in shard_jobs:
        partner = by_id.get(named_partner(job) or -1)
        if partner is not None and partner.nodes == job.nodes and partner.job_id != job.job_id:
            root = min(group.get(job.job_id, job.job_id), group.get(partner.job_id, partner.job_id))
            group[job.job_id] = group[partner.job_id] = root
    ends: dict[int, tuple[float | None, int]] = {}
    for job in shard_jobs:
        root = group.get(job.job_id, job.job_id)
        end, nodes = ends.get(root, (None, job.num_nodes))
        if job.end_time is not None:
            end = job.end_time if end is None else max(end, job.end_time)
        ends[root] = (end, nodes)
    return list(ends.values())


def _agnostic_choice(o: _Options, free_gpus: int) -> _Choice:
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
    return _Choice(col, cap, np.zeros(len(rows), dtype=np.int64), admitted, spent)


@dataclass(frozen=True)
class _Queue:
    """What the objective needs of the cluster: free and usable GPUs, running jobs' releases."""

    free_gpus: int
    gpus_total: int
    releases: list[tuple[float, int]]  #: ``running_releases`` (sorted)

    @cached_property
    def release_times(self) -> np.ndarray:
        return np.array([end for end, _ in self.releases], dtype=np.float64)

    @cached_property
    def release_gpus(self) -> np.ndarray:
        return np.array([gpus for _, gpus in self.releases], dtype=np.int64)


def _expected_cost_s(o: _Options, choice: _Choice, queue: _Queue, crowd: int,
                     ends: list[float] | None = None) -> float:
    """The objective every plan is scored by (seconds of JCT, summed over jobs).

    The pending jobs' expected completion times after now (``_expected_completion_s``)
    plus what the plan's GPU-seconds cost the jobs still to come: each GPU-second a
    plan holds delays a job queued behind it by 1/``gpus_total`` s, and ``crowd`` (the
    jobs the carbon-agnostic plan cannot start now) is taken as the queue later
    arrivals will join. Without it a cap (-36 % power, -18 % speed) looks free on a busy
    cluster, and the 22 % more GPU-time it holds makes everyone arriving later wait.
    With no queue the term is zero: nothing waits for those GPU-seconds. Each job's expected
    completion goes into ``ends`` if given.
    """
    completion = _expected_completion_s(o, choice, queue.free_gpus, queue.releases, ends)
    if not crowd:
        return completion
    return completion + _crowd_delay_s(o.gpus[choice.col] * o.runtime[o.rows, choice.col, choice.cap], queue, crowd)


def _crowd_delay_s(gpu_s: np.ndarray, queue: _Queue, crowd: int) -> float:
    """What the jobs still to come wait for GPU-seconds ``gpu_s`` held (``_expected_cost_s``)."""
    return crowd * float(gpu_s.sum()) / max(queue.gpus_total, 1)


def _packed(col: np.ndarray, start: np.ndarray, admitted: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """What tells plans apart, on the last axis (one row per plan): their columns, starts and
    admissions (a shape: the first three quarters, what a placement depends on), then their caps."""
    return np.concatenate((col, start, admitted, cap), axis=-1, dtype=np.int64)


def _key(choice: _Choice) -> bytes:
    """``_packed`` of one plan, as a dict key."""
    return _packed(choice.col, choice.start, choice.admitted, choice.cap).tobytes()


def _enactment_lower_bound_s(o: _Options, choice: _Choice, queue: _Queue, crowd: int) -> float:
    """A lower bound on ``_expected_cost_s`` of ``choice`` however ``_enact`` places it.

    Enacting only changes the jobs starting now: each starts at a size its chain allows or
    queues at its request. So each of those completes no sooner than its fastest column at its
    cap and holds no fewer GPU-seconds than its least; every other job keeps its configuration
    and completes no sooner than its start's wait plus its runtime.
    """
    rows = o.rows
    starting = choice.admitted & (choice.start == 0)
    runtime = o.runtime[rows, choice.col, choice.cap]
    fastest, least_gpu_s = o.fastest
    total = float(np.where(starting, fastest[rows, choice.cap], o.wait[rows, choice.start] + runtime).sum())
    if crowd:
        total += _crowd_delay_s(np.where(starting, least_gpu_s[rows, choice.cap], o.gpus[choice.col] * runtime),
                                queue, crowd)
    return total


def _cost_lower_bound_s(o: _Options, choice: _Choice, queue: _Queue, crowd: int) -> float:
    """A lower bound on ``_expected_cost_s`` (at most it, never above), in a few array operations.

    In the queue estimate a job that does not start now starts no earlier than its earliest
    start, nor before the GPUs free so far could hold it: the GPUs free after the admitted
    jobs, plus those every running and admitted job has released by then (jobs started
    meanwhile only take GPUs back). A job larger than all of them starts once everything has
    ended, no earlier than the last end. The GPU-second term is the objective's own.
    """
    rows = o.rows
    gpus = o.gpus[choice.col]
    runtime = o.runtime[rows, choice.col, choice.cap]
    now = choice.admitted & (choice.start == 0)
    later = ~now
    total = float(runtime[now].sum())
    if later.any():
        times = np.concatenate((queue.release_times, runtime[now]))
        order = np.argsort(times, kind="stable")
        ends = np.concatenate(([0.0], times[order]))
        freed = np.concatenate((queue.release_gpus, gpus[now]))[order]
        room = np.maximum.accumulate(np.concatenate(([0], np.cumsum(freed))) + queue.free_gpus - int(gpus[now].sum()))
        first = np.minimum(np.searchsorted(room, gpus[later], side="left"), len(ends) - 1)
        total += float((np.maximum(o.wait[rows, choice.start][later], ends[first]) + runtime[later]).sum())
    if crowd:
        total += _crowd_delay_s(gpus * runtime, queue, crowd)
    return total


def _score(o: _Options, choice: _Choice, queue: _Queue, crowd: int) -> _Scored:
    """``choice``'s objective, and its spend with every job at its ``_queued_intensity``."""
    forecast = o.forecast
    ends = None if forecast is None else [0.0] * len(o.rows)
    cost = _expected_cost_s(o, choice, queue, crowd, ends)
    intensity = (o.intensity[o.rows, choice.start] if forecast is None
                 else _queued_intensity(o, choice, np.asarray(ends), forecast))
    return _Scored(cost, float((o.energy_kwh[o.rows, choice.col, choice.cap] * intensity).sum()), intensity)


def _queued_intensity(o: _Options, choice: _Choice, ends: np.ndarray, forecast: CarbonForecast) -> np.ndarray:
    """Budget units per kWh of each job over its run as the queue estimate expects it: the
    forecast's mean from its expected start to its expected end (``ends``, seconds from now).

    The greedy plans price a deferred job at its window's intensity, as if it started there;
    jobs deferred into the same trough, or queued behind others, run past it, and a budget
    held to the window's figure is not the carbon the plan will emit: a tight budget "held"
    by deferring whole queues into one trough, and its users waited for carbon that was
    never saved (at budget 0.6, over twice FIFO's JCT on 78 of 168 generated workloads
    before, 59 after; docs/policies.md, "Budgeted as queued"). A job the estimate never
    starts (a configuration not allowed: infinite runtime) keeps its planned start's figure.
    """
    runtime = o.runtime[o.rows, choice.col, choice.cap]
    known = np.isfinite(ends)  # a finite end has a finite runtime, and start = end - runtime >= 0
    end = np.where(known, ends, 0.0)
    start = end - np.where(known, runtime, 0.0)
    mean = np.asarray(forecast.mean_over(o.now + start, o.now + end), dtype=np.float64) / 1000.0
    return np.where(known, mean, o.intensity[o.rows, choice.start])


def _next_end(releases: list[tuple[float, int]], ri: int, nrel: int,
              started: list[tuple[float, int]]) -> tuple[tuple[float, int] | None, bool]:
    """The earliest (end, GPUs) not yet taken, and whether it is one of the planned starts
    (heap ``started``) rather than a running job's (``releases[ri:]``, sorted); (None, False)
    when none is left."""
    if ri < nrel:
        if started and started[0] < releases[ri]:
            return started[0], True
        return releases[ri], False
    if started:
        return started[0], True
    return None, False


def _start_oldest(queues: dict[int, list[int]], size: int, t: float, runtime: list[float],
                  started: list[tuple[float, int]], need: float, ends: list[float] | None) -> tuple[float, float]:
    """Start the oldest queued job of ``size`` GPUs at ``t`` (its end onto ``started``, and into
    ``ends`` if given); returns its completion time and the smallest size still queued (``need``,
    unless its queue emptied)."""
    queue = queues[size]
    j = heapq.heappop(queue)
    end = t + runtime[j]
    if ends is not None:
        ends[j] = end
    heapq.heappush(started, (end, size))
    if not queue:
        del queues[size]
        need = min(queues) if queues else math.inf
    return end, need


def _expected_completion_s(o: _Options, choice: _Choice, free_gpus: int,
                           releases: list[tuple[float, int]], ends: list[float] | None = None) -> float:
    """The sum of the pending jobs' expected completion times after now (so, up to a
    constant, their JCT); each job's, by row, into ``ends`` if given (``policy/colocation.py``
    weighs a job's wait by it).

    Admitted jobs start now (they fit, by construction). The others are played as a
    backfilling Slurm plays them: from its earliest start (now, or its deferred window) a
    job is eligible, and whenever GPUs free (running and planned jobs end by their
    expected runtimes) the eligible jobs that fit start, oldest first. So a deferred job
    that comes back takes the next free GPUs ahead of the jobs queued meanwhile, as it
    would on the cluster. Every job that fits starts (no reservation holds GPUs back):
    with time limits over-estimating runtimes, a stricter FIFO estimate over-states
    queueing, and then deferring a large job out of the queue looks free when it is not.
    A configuration the user does not allow has an infinite runtime, so a plan using
    one scores infinity.
    """
    rows = o.rows
    gpus = o.gpus[choice.col].tolist()
    runtime = o.runtime[rows, choice.col, choice.cap].tolist()
    earliest = o.wait[rows, choice.start].tolist()
    now_admitted = (choice.admitted & (choice.start == 0)).tolist()
    # The ends to come: ``releases`` (sorted, read in order) merged with a heap of the ends of
    # the jobs started here; the smaller of the two heads is next, the same (end, GPUs) pairs in
    # the same order as one heap of both would pop.
    ri, nrel = 0, len(releases)
    started: list[tuple[float, int]] = []
    left, total, later = free_gpus, 0.0, []
    for j, admitted in enumerate(now_admitted):
        if admitted:
            left -= gpus[j]
            total += runtime[j]
            heapq.heappush(started, (runtime[j], gpus[j]))
            if ends is not None:
                ends[j] = runtime[j]
        else:
            later.append((earliest[j], j))
    later.sort()
    # Eligible rows per GPU count, each a heap (the oldest job on top). Starting every job that
    # fits, oldest first, in one pass over the eligible jobs by age is the same as starting,
    # again and again, the oldest of the size queues' heads that fit (a job passed over did not
    # fit with more GPUs left, so it cannot fit later in the pass): the same jobs start in the
    # same order, and a start costs one look per distinct size instead of a pass over the queue.
    queues: dict[int, list[int]] = {}
    need = math.inf  # the smallest eligible size (inf: none eligible)
    t, k, count = 0.0, 0, len(later)
    while k < count or queues:
        while k < count and later[k][0] <= t:
            j = later[k][1]
            queue = queues.get(gpus[j])
            if queue is None:
                queues[gpus[j]] = [j]
                need = min(need, gpus[j])
            else:
                heapq.heappush(queue, j)
            k += 1
        if queues and left >= need:
            while True:
                oldest, size = -1, 0
                for g, queue in queues.items():
                    if g <= left and (oldest < 0 or queue[0] < oldest):
                        oldest, size = queue[0], g
                if oldest < 0:
                    break
                end, need = _start_oldest(queues, size, t, runtime, started, need, ends)
                left -= size
                total += end
        arrive = later[k][0] if k < count else math.inf
        nxt, from_started = _next_end(releases, ri, nrel, started)
        if nxt is not None and nxt[0] <= arrive and (queues or k < count):
            # This end, and the ends after it that free too few GPUs for any eligible size before
            # the next arrival (they change nothing but the time and the GPUs left): what as many
            # turns of the outer loop would do, one end each.
            while True:
                if from_started:
                    heapq.heappop(started)
                else:
                    ri += 1
                t, left = max(t, nxt[0]), left + nxt[1]
                if left >= need:
                    break
                nxt, from_started = _next_end(releases, ri, nrel, started)
                if nxt is None or not nxt[0] < arrive:
                    break
        elif arrive < math.inf:
            t = arrive
        elif queues:  # larger than the whole cluster: it starts once everything ahead has ended
            size = min(queues, key=lambda g: queues[g][0])
            end, need = _start_oldest(queues, size, t, runtime, started, need, ends)
            left -= size
            total += end
    return total


def _carbon_agnostic(jobs: PendingJobs, now: float) -> Plan:
    decisions = tuple(released_as_started(job, now, "no carbon forecast: start now (carbon-agnostic)")
                      for job in jobs.jobs)
    return Plan(decisions=decisions, notes=("carbon-agnostic: no forecast, every managed job is released",))


def powerflow(budget_fraction: float | None = 1.0, price: float = 0.0) -> GreenFlowPolicy:
    """PowerFlow: GreenFlow with an energy budget instead of a carbon one (no time shifting)."""
    return GreenFlowPolicy(name="powerflow", resource="energy", budget_fraction=budget_fraction, price=price)
