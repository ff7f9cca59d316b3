"""GreenFlow and PowerFlow, the policy: per GPU pool, the candidate space (``_options``, held by
the guards, ``_guard``), the plan taken among the candidates (``_solve``), its placement
(``_enact``, ``_placement``) and the decisions it becomes (``_decisions``, ``_share``).
The overview is the package's docstring (``policy/greenflow/__init__.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from slurm_green.core.cluster import ClusterSnapshot
from slurm_green.core.decision import DecisionContext, DecisionMemo
from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.plan import JobDecision, Plan, Price
from slurm_green.policy.config_table import cap_choices, config_table, gpu_options, layout
from slurm_green.policy.greenflow.greedy import agnostic_choice, greedy_choice, plan_key, price_grid
from slurm_green.policy.greenflow.options import (Choice, Options, Where, feasible_chain, laid_out, least_change,
                                                  node_facts, runtime_of)
from slurm_green.policy.greenflow.queue_estimate import (Queue, Scored, enactment_lower_bound_s,
                                                         expected_completion_s, running_releases, score)
from slurm_green.policy.pending import PendingJobs, pending_jobs
from slurm_green.policy.gpu_types import gpu_pools
from slurm_green.policy.managed import released_as_started
from slurm_green.policy.placement import FreeGpus
from slurm_green.policy.placement.network import NodeChooser
from slurm_green.policy.placement.site import ScoredChoice
from slurm_green.policy.priced_sharing import Colocation, Planned, share_where_cheaper

_J_PER_KWH = 3.6e6


#: A candidate plan as enacted: (choice, row -> (GPU column, nodes) of the jobs starting now, the key
#: its score is kept under, its price or None for the carbon-agnostic plan).
_Candidate = tuple[Choice, dict[int, tuple[int, tuple[str, ...]]], bytes, float | None]


@dataclass(frozen=True)
class Solution:
    """The plan a decision takes and why: its objective, the carbon-agnostic plan's, the budget."""

    choice: Choice  #: as enacted: admitted jobs are the ones placed, the others queue at their request
    placed: dict[int, tuple[int, tuple[str, ...]]]  #: row -> (GPU column, nodes) of the jobs starting now
    price: float
    #: The objective (``queue_estimate._expected_cost_s``) of this plan and of the carbon-agnostic one.
    expected_cost_s: float
    agnostic_cost_s: float
    budget: float  #: inf with a fixed price
    reference: float  #: the carbon-agnostic plan's carbon (energy)
    note: str
    #: [N] budget units per kWh each job is expected to run at: the forecast's mean over its run
    #: as the queue estimate expects it (``queue_estimate._queued_intensity``), what the budget
    #: held it to.
    intensity: np.ndarray


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
        pools = gpu_pools(snapshot, memo, context.models) if self.typed else [(None, snapshot)]
        decisions: list[JobDecision] = []
        notes = []
        prices = []
        for gpu, pool in pools:
            pool_jobs = jobs if pool is snapshot else pending_jobs(pool, self.default_runtime_s, memo)
            if not len(pool_jobs):
                continue
            gpn, gpus_free, gpus_total = node_facts(pool, memo)
            where = Where.of(pool_jobs, snapshot, pool, gpu, gpn, memo)
            options, caps = self._options(pool_jobs, context, gpn, gpu, where)
            queue = Queue(gpus_free, gpus_total, running_releases(pool, now, memo))
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

    def _share(self, jobs: PendingJobs, o: Options, solved: Solution, queue: Queue,
               pool: ClusterSnapshot, context: DecisionContext, gpu: str | None,
               decided: list[JobDecision]) -> list[JobDecision]:
        """``decided`` with co-location where it costs less than the plan (``policy/priced_sharing.py``),
        if the site enabled it and a job allows sharing: each job's planned cost is read off the
        plan's own objective (its completion in the queue estimate, its priced carbon, its GPU-seconds)."""
        if self.colocation is None or not any(options.accept_share for options in jobs.options):
            return decided
        choice, rows = solved.choice, o.rows
        ends = [0.0] * len(rows)
        expected_completion_s(o, choice, queue.free_gpus, queue.releases, ends)
        crowd = int((~agnostic_choice(o, queue.free_gpus).admitted).sum())
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
        gpu, pool = gpu_pools(context.snapshot, memo, context.models)[0] if self.typed else (None, context.snapshot)
        jobs = pending_jobs(pool, self.default_runtime_s, memo)
        if not len(jobs):
            return None
        gpn, gpus_free, gpus_total = node_facts(pool, memo)
        options, _ = self._options(jobs, context, gpn, gpu, Where.of(jobs, context.snapshot, pool, gpu, gpn, memo))
        return self._solve(options, gpus_free, Queue(gpus_free, gpus_total, running_releases(pool, now, memo)), pool,
                           memo, context.budget_scale, self._chooser(pool, context, gpu))

    def _chooser(self, pool: ClusterSnapshot, context: DecisionContext, gpu: str | None) -> NodeChooser | None:
        """The site's node choice for one-node jobs in ``pool`` (None: network placement's)."""
        if not self.placement or not self.place:
            return None
        return ScoredChoice.for_pool(dict(self.placement), pool, context.models, gpu)

    # -- candidate space ---------------------------------------------------------------

    def _options(self, jobs: PendingJobs, context: DecisionContext, gpn: int, gpu: str | None,
                 where: Where | None = None) -> tuple[Options, np.ndarray]:
        """The candidate space of ``jobs`` on GPU type ``gpu`` (in a pool of ``gpn`` GPUs per node;
        each job laid out as ``where`` says, None: the pool's way), and its cap axis."""
        where = where or Where.anywhere(len(jobs), gpn)
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
        tput, power = laid_out(table, types, jobs, where, gpn, context, gpu)  # [N, G, C] each
        rows = np.arange(n)
        asked_tput = tput[rows, requested_col, full_cap]
        work = jobs.runtime_s * asked_tput
        runtime = runtime_of(work, tput)
        # Where the model gives the request no (finite, positive) throughput, the job's work is
        # unknown, so is every configuration's runtime: none is a candidate, and the request at
        # full power runs its runtime as asked by definition (``least_change`` takes over).
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
            least_change(stuck, runtime, ok, allowed, counts, jobs.gpus, jobs.runtime_s, modelled, full_cap)
        chain = feasible_chain(chain, ok.any(axis=2))
        energy = power * runtime / _J_PER_KWH
        # Energy stays finite everywhere: the requested configuration at full power is the
        # carbon-agnostic reference even when the user's range excludes it. (Where a model gives
        # no throughput the runtime, and so the energy, is infinite: never a candidate, it is
        # kept finite so that a zero price times it is not NaN in ``greedy._choose_walk``.)
        if not np.isfinite(energy).all():
            energy = np.where(np.isfinite(energy), energy, 0.0)
        runtime = np.where(ok, runtime, np.inf)
        intensity, wait = self._intensity(jobs, context.forecast, context.now, jobs.runtime_s)
        timed = context.forecast if self.resource == "carbon" else None
        return Options(runtime, energy, intensity, wait, chain, counts, requested_col, full_cap, timed,
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

    # -- the plan taken ----------------------------------------------------------------

    def _solve(self, o: Options, free_gpus: int, queue: Queue, snapshot: ClusterSnapshot,
               memo: DecisionMemo, budget_scale: float, choose: NodeChooser | None) -> Solution:
        unit = "kg CO2" if self.resource == "carbon" else "kWh"
        agnostic = agnostic_choice(o, free_gpus)
        # Jobs the carbon-agnostic plan leaves queued: the crowd that every GPU-second a plan
        # adds makes wait longer, including the jobs that will arrive behind them.
        crowd = int((~agnostic.admitted).sum())
        seen: dict[bytes, tuple[Choice, dict[int, tuple[int, tuple[str, ...]]]]] = {}
        places: dict[bytes, dict[int, tuple[int, tuple[str, ...]]]] = {}
        scores: dict[bytes, Scored] = {}
        queued: dict[bytes, Choice] = {}

        def enacted(choice: Choice) -> tuple[Choice, dict[int, tuple[int, tuple[str, ...]]], bytes]:
            """The plan as it will be enacted (after placement), its nodes and its key for
            ``objective``; each distinct plan is enacted once, and placed once per distinct sizes
            and starts (caps do not move a placement: plans that differ only in caps share it)."""
            key = plan_key(choice)
            shape = key[:len(key) // 4 * 3]
            if key not in seen:
                placed_choice, placed = self._enact(choice, o, snapshot, memo, choose, places.get(shape))
                places[shape] = placed
                seen[key] = (placed_choice, placed)
            return (*seen[key], key)

        def scored(key: bytes) -> Scored:
            """The enacted plan's objective and spend, scored once per distinct plan and only when
            asked: the queue estimate is the costliest part. Where the spend does not depend on
            when jobs run (``o.forecast`` None) it is known unscored, and the plans that cannot
            be taken are never scored."""
            value = scores.get(key)
            if value is None:
                value = scores[key] = score(o, seen[key][0], queue, crowd)
            return value

        def objective(key: bytes) -> float:
            return scored(key).cost_s

        def as_queued(choice: Choice, key: bytes) -> Choice:
            """``choice`` with the spend it is budgeted by: each job's carbon over its expected run."""
            if o.forecast is None:
                return choice
            held = queued.get(key)
            if held is None:
                held = queued[key] = Choice(choice.col, choice.cap, choice.start, choice.admitted, scored(key).spent)
            return held

        def solution(choice: Choice, placed: dict[int, tuple[int, tuple[str, ...]]], key: bytes, price: float,
                     budget: float, note: str) -> Solution:
            return Solution(choice, placed, price, objective(key), agnostic_s, budget, agnostic.spent, note,
                            scored(key).intensity)

        agnostic, agnostic_nodes, agnostic_key = enacted(agnostic)
        agnostic = as_queued(agnostic, agnostic_key)
        agnostic_s = objective(agnostic_key)
        if self.budget_fraction is None:
            choice, placed, key = enacted(greedy_choice(o, self.price, free_gpus))
            choice = as_queued(choice, key)
            note = f"{self.name}: fixed price {self.price:.3g} s/{unit}, plan {choice.spent:.3g} {unit}"
            return solution(choice, placed, key, self.price, math.inf, note)
        fraction = self.budget_fraction * budget_scale  # a budget per period paces it (controller/budget.py)
        budget = fraction * agnostic.spent
        # (choice, nodes, key of its objective, price or None for the carbon-agnostic plan) by
        # index, as enacted: the candidates depend on the budget only through the guard's side of
        # 1 (``_asks_carbon``), which is what makes a looser budget on the same side no worse.
        grid = price_grid(o, free_gpus)
        first: _Candidate = (agnostic, agnostic_nodes, agnostic_key, None)
        entries: dict[int, _Candidate]
        order: list[tuple[float, int]]  #: (lower bound on the objective, index), the order they are scored in
        best: tuple[float, float, int] | None
        if budget >= agnostic.spent:
            # Held to the budget itself (the slack below cannot loosen it past the reference). The
            # carbon-agnostic plan fits and is the best so far, so a plan that cannot beat it,
            # however it is enacted (``enactment_lower_bound_s``), is never placed; the others are
            # scored in the order of that bound, and once it exceeds the best found none after it
            # can win. The plan taken is the one enacting and scoring every candidate would take
            # (docs/policies.md, "Searching the candidates by a bound").
            held_to, best = budget, (agnostic_s, agnostic.spent, 0)
            beaten = agnostic_s * (1 + 1e-9) + 1e-6
            entries, order = {0: first}, []
            for i, (c, p) in enumerate(grid, 1):
                bound = enactment_lower_bound_s(o, c, queue, crowd)
                if bound <= beaten:
                    entries[i] = (*enacted(c), p)
                    order.append((bound, i))
            order.sort()
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

    # -- placement and output ----------------------------------------------------------

    def _enact(self, choice: Choice, o: Options, snapshot: ClusterSnapshot, memo: DecisionMemo,
               choose: NodeChooser | None, placed: dict[int, tuple[int, tuple[str, ...]]] | None = None,
               ) -> tuple[Choice, dict[int, tuple[int, tuple[str, ...]]]]:
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
            return Choice(choice.col, choice.cap, choice.start, starting, choice.spent), placed
        now_placed = np.zeros(len(o.rows), dtype=bool)
        now_placed[list(placed)] = True
        col = np.where(starting & ~now_placed, o.queued_col, choice.col)
        for j, (c, _) in placed.items():
            col[j] = c
        rows = o.rows
        spent = float((o.energy_kwh[rows, col, choice.cap] * o.intensity[rows, choice.start]).sum())
        return Choice(col, choice.cap, choice.start, now_placed, spent), placed

    def _placement(self, choice: Choice, o: Options, free: FreeGpus,
                   choose: NodeChooser | None) -> dict[int, tuple[int, tuple[str, ...]]]:
        """Nodes for admitted jobs, largest first (a one-node job's by ``choose`` if the site set one),
        each among the nodes its partition allows, laid out in their GPUs per node (``Where``).

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

    def _decisions(self, jobs: PendingJobs, o: Options, cap_axis: np.ndarray, solved: Solution,
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


def _carbon_agnostic(jobs: PendingJobs, now: float) -> Plan:
    decisions = tuple(released_as_started(job, now, "no carbon forecast: start now (carbon-agnostic)")
                      for job in jobs.jobs)
    return Plan(decisions=decisions, notes=("carbon-agnostic: no forecast, every managed job is released",))


def powerflow(budget_fraction: float | None = 1.0, price: float = 0.0) -> GreenFlowPolicy:
    """PowerFlow: GreenFlow with an energy budget instead of a carbon one (no time shifting)."""
    return GreenFlowPolicy(name="powerflow", resource="energy", budget_fraction=budget_fraction, price=price)
