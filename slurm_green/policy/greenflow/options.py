"""The candidate space of one GreenFlow decision: per pending job, its GPU columns x power caps
(runtime, energy), its two starts (now, its lowest-carbon window) and where it may be placed.

``Options`` is built once per decision and pool (``GreenFlowPolicy._options``) from the
tables here: ``runtime_of`` (the single place progress is modelled), ``laid_out`` (a job laid
out in other GPUs per node than its pool's), ``least_change`` and ``feasible_chain`` (what a
job is left with when the guards allow it nothing). A ``Choice`` is one plan in that space:
``greedy.py`` builds them, ``queue_estimate.py`` scores them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from slurm_green.core.cluster import ClusterSnapshot, Node
from slurm_green.core.decision import DecisionContext, DecisionMemo
from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.partitions import node_rules
from slurm_green.policy.config_table import ConfigTable, config_table
from slurm_green.policy.pending import PendingJobs, gpus_per_node_of
from slurm_green.policy.placement import node_rows
from slurm_green.policy.placement import gpus_free as placement_gpus_free


@dataclass(frozen=True)
class Where:
    """Where each pending job of a pool may run (``core.partitions``, the planner's rule): per
    row, the pool's nodes it is held to (None: all of them, the usual case of one partition)
    and the GPUs per node its sizes are laid out in (its allowed nodes' most common count; the
    pool's where it is held to none; for a job asking CPUs or memory per GPU no more than some
    of those nodes holds them for, ``NodeRules.most_gpus_per_node``, nor less than it asked).
    Its sizes and pins then fit its partition and its nodes, and ``planner.within_partition``
    and ``planner.sized_to_fit_nodes`` have nothing to drop."""

    allowed: tuple[frozenset[str] | None, ...]
    gpn: tuple[int, ...]
    #: Per allowed set: (the FreeGpus names it was read against, which of them it allows).
    masks: dict[frozenset[str], tuple[tuple[str, ...], np.ndarray]]

    @classmethod
    def anywhere(cls, n: int, gpn: int) -> Where:
        return cls((None,) * n, (gpn,) * n, {})

    @classmethod
    def of(cls, jobs: PendingJobs, snapshot: ClusterSnapshot, pool: ClusterSnapshot, gpu: str | None, gpn: int,
           memo: DecisionMemo) -> Where:
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
            if job.cpus_per_gpu or job.memory_per_gpu_mib:  # as many as a node holds its CPUs and memory for
                most = rules.most_gpus_per_node(job, held[0] if held[0] is not None else among)
                gpns.append(max(job.gpus_per_node, min(held[1], most)))
            else:
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
class Options:
    """The candidate space of one decision: jobs x GPU columns x caps, plus two starts."""

    runtime: np.ndarray  #: [N, G, C] seconds, inf where not allowed
    energy_kwh: np.ndarray  #: [N, G, C]
    intensity: np.ndarray  #: [N, 2] budget units per kWh at start now / deferred
    wait: np.ndarray  #: [N, 2] seconds
    chain: np.ndarray  #: [N, M] allowed GPU columns ascending, -1 padded
    gpus: np.ndarray  #: [G] GPU count of each column
    requested_col: np.ndarray  #: [N]
    full_cap: int  #: index of cap 1.0
    #: The forecast a plan's spend is read from over each job's expected run
    #: (``queue_estimate._queued_intensity``); None where the spend does not depend on when a
    #: job runs (energy, or no forecast).
    forecast: CarbonForecast | None
    now: float  #: the decision's time, epoch seconds (the queue estimate counts from it)
    where: Where  #: the nodes each job may be placed on and the GPUs per node it is laid out in

    # Price-independent parts of the greedy plans (``greedy.py``), computed once per decision
    # (not once per price).

    @cached_property
    def rows(self) -> np.ndarray:
        return np.arange(self.runtime.shape[0])

    @cached_property
    def starts(self) -> int:
        """S: 2 (now, deferred), or 1 ("now" only) when no job can defer."""
        return 2 if bool(np.isfinite(self.wait[:, 1]).any()) else 1

    @cached_property
    def cells(self) -> np.ndarray:
        """Flat indices, into an [N, G, S] array, of the (job, column, start) cells some cap can
        take: an allowed column and a start the job has (about one in seven on the Philly trace).
        Every other cell costs inf at every cap and price, so the greedy plans price these only."""
        allowed = np.isfinite(self.runtime).any(axis=2)[:, :, None] & np.isfinite(self.wait[:, None, : self.starts])
        return np.flatnonzero(allowed)

    @cached_property
    def sizes(self) -> list[int]:
        """Each job's smallest allowed GPU count, as Python ints for ``greedy._admit``'s loop."""
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
        with (``least_change`` leaves every job an allowed configuration at full power).
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
    def priced(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(energy, intensity, wait + runtime) of each of ``cells`` at each cap, [K, C] each and
        contiguous: the operands of a cell's cost, spelled out so that pricing them is elementwise
        (a broadcast over the short cap axis is several times slower), caps last so that the per-cap
        minimum reads contiguous memory."""
        g, s = len(self.gpus), self.starts
        config, start = self.cells // s, self.cells % s  # (job, column) as a flat [N, G] index, and start
        job = config // g
        c = self.runtime.shape[2]
        energy = self.energy_kwh.reshape(-1, c)[config]
        intensity = np.ascontiguousarray(np.broadcast_to(self.intensity[job, start][:, None], energy.shape))
        return energy, intensity, self.wait[job, start][:, None] + self.runtime.reshape(-1, c)[config]

    @cached_property
    def fastest(self) -> tuple[np.ndarray, np.ndarray]:
        """Per job and cap [N, C]: the least runtime and the least GPU-seconds over all columns."""
        return self.runtime.min(axis=1), (self.gpus[None, :, None] * self.runtime).min(axis=1)

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
class Choice:
    """One plan in an ``Options`` space, per job (row): its GPU column, its cap, its start, whether
    it starts now; and what the plan spends (carbon or energy, budget units)."""

    col: np.ndarray
    cap: np.ndarray
    start: np.ndarray  #: 0 now, 1 deferred
    admitted: np.ndarray
    spent: float


@dataclass
class _NodeFactsMemo:
    """(node tuple, (GPUs per node, free GPUs, usable GPUs)) of the last snapshot, in a
    controller's memo: all three depend on the nodes only, which a simulator hands over as
    the same tuple while none changed (the held reference keeps the identity check sound)."""

    last: tuple[tuple[Node, ...], tuple[int, int, int]] | None = None


def node_facts(snapshot: ClusterSnapshot, memo: DecisionMemo) -> tuple[int, int, int]:
    """(GPUs per node, free GPUs, usable GPUs) of the snapshot's nodes."""
    held = memo.get(_NodeFactsMemo)
    if held.last is None or held.last[0] is not snapshot.nodes:
        rows = node_rows(snapshot.nodes, memo)
        usable = sum([row[1] for row in rows if row[0]])
        held.last = (snapshot.nodes, (gpus_per_node_of(snapshot, memo), placement_gpus_free(snapshot.nodes, memo),
                                      usable))
    return held.last[1]


def laid_out(table: ConfigTable, types: np.ndarray, jobs: PendingJobs, where: Where, gpn: int,
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


def least_change(stuck: np.ndarray, runtime: np.ndarray, ok: np.ndarray, allowed: np.ndarray, counts: np.ndarray,
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


def feasible_chain(chain: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """Each row's chain without the columns where no cap is allowed, left-aligned, -1 padded;
    a row left empty keeps its first column (none is: ``least_change`` leaves every row one)."""
    rows = np.arange(len(chain))[:, None]
    valid = chain >= 0
    keep = valid & feasible[rows, np.maximum(chain, 0)]
    if np.array_equal(keep, valid):  # every column feasible (the usual case): the chain as it is
        return chain
    keep[:, 0] |= ~keep.any(axis=1)
    order = np.argsort(~keep, axis=1, kind="stable")
    return np.where(np.take_along_axis(keep, order, axis=1), np.take_along_axis(chain, order, axis=1), -1)


def runtime_of(work: np.ndarray, throughput: np.ndarray) -> np.ndarray:
    """Seconds to do ``work`` at each configuration's throughput (the single place progress is modelled)."""
    with np.errstate(divide="ignore"):
        return np.where(throughput > 0, work[:, None, None] / np.where(throughput > 0, throughput, 1.0), np.inf)
