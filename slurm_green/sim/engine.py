"""The discrete-event simulator: a ``ClusterBackend`` that plays three parts of a real site.

- **job_submit.lua**: when a trace job arrives it gets the trusted marker in its
  AdminComment (``format_marker``) and, if managed with flexibility, the fallback
  begin time = its deadline, by the plugin's own rule (``green_options.on_arrival``,
  which the Lua is tested against): a job nobody releases still starts by its deadline.
- **Slurm**: a FIFO scheduler with Slurm's backfill (every job that does not fit gets a
  reservation of whole nodes, from the running jobs' time limits and the earlier
  reservations; a later job starts only where it delays none of them) that honours
  begin times (``SetStartTime``), GPU counts (``SetGpus``), node lists (``SetNodes``),
  time limits (``SetTimeLimit``) and holds. Compared with a live Slurm on one queue: tests/integration/sim.
  Without a node list it takes the first nodes that fit, in index order, and the
  lowest free GPU indices (no topology awareness), as a plain Slurm would.
- **the training helper** (``slurm_green.train``), in jobs whose users opted in to
  checkpoint-and-requeue (``TraceOptions.accept_requeue``): ``SignalJob`` (SIGUSR2) makes
  it write a checkpoint ``checkpoint_s`` later and report it (``progress_reports``), and
  ``RequeueHold`` stops the job, held, as ``scontrol requeuehold`` does: its work since that
  checkpoint is lost, Slurm delays its restart by ``restart_delay_s`` (its BeginTime), and
  it restarts from the checkpoint at the GPU count in force then, paying ``restore_s`` to
  reload. A job without the helper is not signalled (SIGUSR2 would kill it).
  In jobs whose users turned on the helper's layer freezing (``TraceOptions.accept_freeze``)
  the front blocks freeze as training goes (``freeze_steps``: the frozen share from each
  share of the work done on): the job then runs at its effective rate, the freezing model's
  (``models.freezing.effective_rate``: the compute of the skipped backward pass, not the
  synchronisation, times the frozen penalty on statistical progress), and draws its lower
  power. Its work is counted in statistical progress, so a report's time left is true at
  its rate now (and an upper bound: later blocks freeze too).
- **Prolog**: at start it verifies the signed decision token in the job's Comment
  and applies its power-cap fraction by the Prolog's own rule (``decision_token.signed_cap``);
  a missing or bad token, or a cap that is not a fraction in (0, 1], means full power.

A job's runtime and power come from the models for its actual configuration (GPUs,
nodes actually spanned, cap), so a policy's choice changes runtime and energy. A job
runs at one rate except while it shares its GPUs (``ShareGpus``): a job bound to a
running partner starts on the partner's GPUs (same node, same indices, no free GPU
taken), both run at the co-location model's rates and the GPUs draw the pair's power;
when one ends the other returns to its solo rate, and its completion is moved (the
work left at the new rate). Events are arrivals, completions, begin times and
controller ticks, and nothing is stepped in between.

Time limits: a trace job's time limit is its true runtime at the requested size
times ``time_limit_factor`` (users overestimate), rounded up to a minute, and
job_submit.lua records it in the marker as submitted. Limits feed backfill and the
policies' runtime estimates; a decision that slows a job raises its limit as on Slurm
(``SetTimeLimit``, from the planner; a running job's too, when a guest joins its GPU). They are
not enforced: the summary counts the jobs that ran past the limit in force (``past_limit``),
which Slurm would have stopped.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import math
import operator
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Protocol

import numpy as np

from slurm_green.core import decision_token, gpu_freq
from slurm_green.core.actions import (
    Action,
    ActionError,
    ActionResult,
    Hold,
    Release,
    RequeueHold,
    SetDecision,
    SetGpuFreq,
    SetGpus,
    SetNice,
    SetNodes,
    SetStartTime,
    SetTimeLimit,
    ShareGpus,
    SignalJob,
)
from slurm_green.core.clock import ManualClock
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState, Node, NodeState, Partition
from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.green_options import GreenOptions, format_marker, on_arrival
from slurm_green.core.models import Config, JobModel, ModelRegistry, Observation
from slurm_green.core.progress import JobProgress
from slurm_green.models.freezing import DEFAULT_PENALTY, effective_rate, frozen_power_w, penalty
from slurm_green.policy.placement import SWITCH_FEATURE, fragmentation
from slurm_green.sim.backfill import BACKFILL_DEPTH, FreeProfile, Held, first_fit
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.metrics import SimRecord
from slurm_green.sim.power_saving import PowerSaving
from slurm_green.sim.workload import Workload
from slurm_green.slurm import commands

PARTITION = "gpu"
_JOB_FIELDS = tuple(f.name for f in fields(Job))


@dataclass(frozen=True)
class TraceOptions:
    """How the simulated job_submit.lua and users treat trace jobs (which carry no options)."""

    #: Start-time flexibility every trace job grants (``--comment green:flex=...``).
    flex_s: float = 24 * 3600.0
    #: Allowed GPU range: requested / gpu_range .. requested * gpu_range (``gpus=MIN-MAX``).
    gpu_range: float = 2.0
    accept_cap: bool = True
    #: Share of trace jobs whose users allow a shared GPU (``share=yes``), each job drawn
    #: at random with ``share_seed`` (the same jobs in every run of one workload).
    accept_share: float = 0.0
    share_seed: int = 0
    #: Time limit = true runtime at the requested size x this factor.
    time_limit_factor: float = 1.5
    managed: bool = True
    #: Share of trace jobs whose users opt in to checkpoint-and-requeue (``elastic=requeue``)
    #: and run the training helper, drawn like ``accept_share`` (another stream of ``share_seed``).
    accept_requeue: float = 0.0
    #: From SIGUSR2 to a whole checkpoint on disk (the helper's next step, and the write).
    checkpoint_s: float = 60.0
    #: Slurm's own delay of a requeued job's start (BeginTime: about 2 min, seen on 24.11).
    restart_delay_s: float = 120.0
    #: A restarted job's time to start and reload its checkpoint, at its new rate.
    restore_s: float = 60.0
    #: Share of trace jobs that train with the helper's layer freezing (``Freezing``: an
    #: opt-in in the user's code, not a ``green:`` option), drawn like ``accept_share``
    #: (a third stream of ``share_seed``).
    accept_freeze: float = 0.0
    #: (share of a freezing job's work done, share of its blocks frozen from then on): a
    #: choice, not a fit (AutoFreeze and Egeria freeze the front layers as they converge,
    #: early in training); the last share is the helper's default bound (``max_share=0.5``).
    freeze_steps: tuple[tuple[float, float], ...] = ((0.25, 0.25), (0.5, 0.5))
    #: The true frozen-penalty slope (``models.freezing.penalty``); the policies believe the
    #: model's default. 0: freezing converged layers costs no statistical progress.
    freeze_penalty: float = DEFAULT_PENALTY


_JOB_VALUES = operator.attrgetter(*_JOB_FIELDS)
_JOB_POSITION = {f: i for i, f in enumerate(_JOB_FIELDS)}


def _shared_fields(per_node: int) -> dict[str, object]:
    """How Slurm shows a job bound to share ``per_node`` GPUs per node: on shards of one GPU
    (``gres/shard``), not on whole GPUs, so a policy reads the same facts here as there; Slurm
    has no form for more (a job's shards of a node come from one GPU), so such a simulator-only
    share shows its whole GPUs."""
    return {"gpus_per_node": 0, "shards_per_node": 1} if per_node == 1 else {"gpus_per_node": per_node,
                                                                           "shards_per_node": 0}


def _pair_cap(cap: float, host: Config | None) -> float:
    """The cap a shared GPU runs under, for ``ModelRegistry.colocation``: the loosest of its
    jobs' (``gpu/enact.py``), which bounds the pair's power (1.0: none). The policies price a
    pair under the one cap they give both its jobs (``policy/eaco.pair_at_caps``): the same."""
    return max(cap, 1.0 if host is None else host.cap_fraction)


def _unlogged(line: str) -> None:
    """The simulated Prolog's log: nobody reads it (a real Prolog's goes to slurmd's log)."""


def _replace_job(job: Job, changes: dict[str, object]) -> Job:
    """``dataclasses.replace`` for ``Job`` without its per-call introspection (hot in the event loop)."""
    values = list(_JOB_VALUES(job))
    for name, value in changes.items():
        values[_JOB_POSITION[name]] = value
    return Job(*values)


class Ticking(Protocol):
    """What the simulator drives: ``controller.tick.Controller``."""

    def tick(self, now: float) -> object: ...


@dataclass
class _Running:
    """A running job. ``alloc`` is empty for a guest on another job's GPUs (it frees none)."""

    gpus: int
    alloc: list[tuple[int, np.ndarray]]
    limit_end: float
    #: What the job's telemetry will report when it ends (the simulated truth); None once it
    #: shared its GPUs (their energy is not the job's alone).
    seen: Observation | None
    #: Its rate and power now, alone, and since when; its end at that rate.
    throughput: float
    power_w: float
    solo_throughput: float
    solo_power_w: float
    since: float
    end: float
    work_left: float
    #: The job sharing its GPUs, if any, and the GPUs of its allocation (for a guest's host).
    partner: int | None = None
    #: Work left as of its latest checkpoint (a requeue restarts from there), and when the
    #: checkpoint a signal asked for is whole (None: none asked).
    saved_left: float = math.nan
    checkpoint_at: float | None = None
    checkpoint_left: float = math.nan
    #: Frozen share of its blocks, its next freezing step (an index of ``freeze_steps``) and
    #: when that comes at its rate now; its model and configuration (for the rates).
    frozen: float = 0.0
    freeze_step: int = 0
    next_freeze: float = math.inf
    model: JobModel | None = None
    config: Config | None = None

    def __post_init__(self) -> None:
        if math.isnan(self.saved_left):
            self.saved_left = self.work_left

    def left_at(self, t: float) -> float:
        """Work left at ``t``, at its rate now."""
        return max(0.0, self.work_left - (t - self.since) * self.throughput)


class Simulator:
    """See the module docstring. ``signal`` is the true carbon series used for accounting (``None``:
    a simulator that only sizes the jobs, its work and time limits, and is never run)."""

    def __init__(self, workload: Workload, spec: ClusterSpec, models: ModelRegistry, signal: CarbonForecast | None,
                 key: bytes,
                 options: TraceOptions = TraceOptions(), clock: ManualClock | None = None,
                 verify: Callable[[int, str], dict[str, object]] | None = None, telemetry: bool = False) -> None:
        self.workload = workload
        self.spec = spec
        self.models = models
        self.signal = signal
        self.key = key
        #: The Prolog's token check; a caller may share a memoised one (verification is a pure
        #: function of key, job id and token, and a bad token raises every time).
        self._verify = verify or functools.partial(decision_token.verify, key)
        self.options = options
        n = len(workload)
        self.clock = clock or ManualClock(float(workload.submit[0]) if n else 0.0)
        self._models: dict[tuple[str, str | None], JobModel] = {}
        #: Each job's requested GPU type; on a mixed cluster it runs only on nodes of that type
        #: (None: on any node, with the models of the type it lands on).
        self.requested_type = spec.requested_types(n)
        #: Per GPU type, which nodes have it (None: every node).
        self._type_nodes: dict[str | None, np.ndarray] = {t: np.array([spec.type_of(i) == t for i in range(spec.nodes)])
                            for t in spec.gpus_of_type()}
        self._type_nodes[None] = np.ones(spec.nodes, dtype=bool)
        capacity: dict[str | None, int] = {None: spec.gpus}
        capacity.update(spec.gpus_of_type())
        self.requested = np.minimum(workload.gpus, [capacity[t] for t in self.requested_type] if n else spec.gpus)
        #: Each job's work, and its true runtime at the requested size at full power (on its requested type).
        self.work, self.full_runtime = self._resolve_work()
        derived = np.ceil(self.full_runtime * options.time_limit_factor / 60.0) * 60.0
        given = workload.time_limit_s
        self.time_limit = derived if given is None else np.where(np.isfinite(given), given, derived)
        self.record = SimRecord.empty(n, self.time_limit)
        self.free = np.ones((spec.nodes, spec.gpus_per_node), dtype=bool)
        self.free_count = np.full(spec.nodes, spec.gpus_per_node, dtype=np.int64)
        #: ``free_count.sum()``, kept up to date (read at every scheduling pass and sample).
        self._free_total = spec.gpus
        self._node_gpus = np.full(spec.nodes, spec.gpus_per_node)
        self._node_index = {spec.node_name(i): i for i in range(spec.nodes)}
        self._node_views: dict[tuple[int, bytes], Node] = {}  # ``_node``'s, by node and its free GPUs
        self._nodes = [self._node(i) for i in range(spec.nodes)]
        self._dirty_nodes: set[int] = set()
        self._nodes_tuple: tuple[Node, ...] | None = None
        self._jobs: dict[int, Job] = {}
        #: Jobs ended since the controller's last tick, shown to it once as COMPLETED, as squeue
        #: shows an ended job for MinJobAge (300 s by default, a tick interval): the store
        #: accounts a run's last stretch from that record, so a job that started and ended
        #: between two ticks is accounted too.
        self._ended: dict[int, Job] = {}
        self._running: dict[int, _Running] = {}
        self._queue: list[tuple[float, int]] = []  # eligible pending, FIFO order
        self._releases: list[tuple[float, int]] = []  # (begin time, job id), lazily validated
        self._completions: list[tuple[float, int]] = []
        #: Per allocated GPU (where ``free`` is False), the time limit's end of the job holding it:
        #: when backfill's profile expects it back. Kept per GPU, not per job, so that a profile is
        #: read off it at once (a pass over the running jobs per profile was most of its cost).
        self._limit_end = np.zeros((spec.nodes, spec.gpus_per_node))
        self._schedule_needed = False
        self._next_arrival = 0
        self._snapshot: ClusterSnapshot | None = None
        self._partition = Partition(PARTITION, tuple(self._node_index), default=True)
        #: With ``telemetry``, each finished job's true throughput and power, until handed over.
        self._telemetry = telemetry
        self._observations: list[Observation] = []
        #: Pending jobs bound to a partner by ``ShareGpus``: (partner, GPUs per node, nodes asked).
        self._share: dict[int, tuple[int, int, int]] = {}
        self.shares = np.random.default_rng(options.share_seed).random(n) < options.accept_share
        self.elastic = np.random.default_rng([options.share_seed, 1]).random(n) < options.accept_requeue
        self.freezes = np.random.default_rng([options.share_seed, 2]).random(n) < options.accept_freeze
        self._freeze_steps: list[tuple[float, int]] = []  # (time, job id), lazily validated
        #: Requeued jobs' work left (from their checkpoint, with the reload), for their restart.
        self._restart_work: dict[int, float] = {}
        #: A running job was stopped or signalled by an action: the controller should look soon.
        self._acted = False
        #: Running jobs' power now (W) and GPUs holding two jobs, kept up to date for the samples.
        self._power_w = 0.0
        self._shared_gpus = 0
        #: Slurm's power saving, if the site suspends idle nodes; ``_resuming``: the allocation
        #: just made woke a suspended node (its job waits for it).
        self._power_saving = PowerSaving.start(spec.nodes, self.clock.now(), spec.suspend_after_s, spec.resume_s)
        self._resuming = False

    # -- sizes ---------------------------------------------------------------------------

    def _model(self, job_type: str, gpu: str | None = None) -> JobModel:
        """``job_type``'s model on ``gpu`` (None: the registry's own type, which defines a job's work)."""
        model = self._models.get((job_type, gpu))
        if model is None:
            model = self._models[(job_type, gpu)] = self.models.for_job(job_type or None, gpu)
        return model

    def _runs_on(self, alloc: list[tuple[int, np.ndarray]]) -> str | None:
        """The GPU type whose models a job on ``alloc`` runs with: on a mixed cluster its first
        node's type, else None (the registry's own, as before clusters had types)."""
        return self.spec.type_of(alloc[0][0]) if self.spec.typed and alloc else None

    def _config(self, gpus: int, nodes: int, cap: float = 1.0) -> Config:
        return Config(gpus=gpus, nodes=nodes, cap_fraction=cap)

    def _packed_nodes(self, gpus: int) -> int:
        return max(1, math.ceil(gpus / self.spec.gpus_per_node))

    def _resolve_work(self) -> tuple[np.ndarray, np.ndarray]:
        """Work of every job (a trace duration is on the registry's own type), and its runtime at
        the requested size at full power on the type it requested, the only one it runs on (a job
        of any type: on the slowest, which its time limit must cover)."""
        w = self.workload
        tput = np.empty(len(w))  # on the registry's own type: what defines the work
        runs = np.empty(len(w))  # on the requested type (the same on a cluster of one type)
        cache: dict[tuple[str, int, str | None], float] = {}

        def throughput(t: str, g: int, gpu: str | None) -> float:
            key = (t, g, gpu)
            if key not in cache:
                cache[key] = self._model(t, gpu).throughput(self._config(g, self._packed_nodes(g)))
            return cache[key]

        typed = self.spec.typed
        kinds = sorted(self.spec.gpus_of_type())
        for i, (t, g, gpu) in enumerate(zip(w.job_type, self.requested.tolist(), self.requested_type)):
            tput[i] = throughput(t, g, None)
            if not typed:
                runs[i] = tput[i]
            else:  # a job of any type is limited by the slowest it may land on
                runs[i] = throughput(t, g, gpu) if gpu is not None else min(throughput(t, g, k) for k in kinds)
        work = np.where(np.isfinite(w.work), w.work, w.duration_s * tput)
        return work, work / runs

    def submitted_layout(self, index: int) -> tuple[int, int]:
        """(GPUs per node, nodes) trace job ``index`` is submitted with: its request packed onto whole nodes."""
        gpus = int(self.requested[index])
        return (gpus, 1) if gpus <= self.spec.gpus_per_node else (self.spec.gpus_per_node, self._packed_nodes(gpus))

    def gpu_range(self, gpus: int) -> tuple[int, int]:
        """The GPU counts (``gpus=MIN-MAX``) the simulated user of a job submitted with ``gpus`` allows."""
        return max(1, int(gpus / self.options.gpu_range)), min(self.spec.gpus, int(gpus * self.options.gpu_range))

    # -- ClusterBackend -------------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        """Pending and running jobs, those ended since the last tick (COMPLETED, once) and all
        nodes; rebuilt only after a change."""
        if self._snapshot is None:
            if self._dirty_nodes or self._nodes_tuple is None:
                for i in self._dirty_nodes:
                    self._nodes[i] = self._node(i)
                self._dirty_nodes.clear()
                # The same tuple while no node changed, so policies can reuse what they derived from it.
                self._nodes_tuple = tuple(self._nodes)
            self._snapshot = ClusterSnapshot(taken_at=self.clock.now(), slurm_version="sim",
                                             jobs=(*self._jobs.values(), *self._ended.values()),
                                             nodes=self._nodes_tuple,
                                             partitions=(self._partition,))
        elif self._snapshot.taken_at != self.clock.now():
            self._snapshot = replace(self._snapshot, taken_at=self.clock.now(), _job_index={})
        return self._snapshot

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        return [self._apply_one(action) for action in actions]

    # -- TelemetrySource (with ``telemetry=True``) -----------------------------------------

    def observations(self, now: float, snapshot: ClusterSnapshot) -> list[Observation]:
        """Jobs finished since the last call, as an instrumented job and its GPUs' energy
        counters would report them: the true throughput and power of the configuration
        each ran in."""
        found, self._observations = self._observations, []
        return found

    # -- the training helper's progress reports (``controller.resize.ProgressSource``) --------

    def progress_of(self, job_id: int, now: float) -> JobProgress | None:
        """What the helper of an elastic or freezing job reports at ``now``: its work done and in
        all, its rate, its frozen share and its latest whole checkpoint; None for a job without
        the helper, or not running."""
        running = self._running.get(job_id)
        if running is None or not (self.elastic[job_id - 1] or self.freezes[job_id - 1]):
            return None
        checkpoint = running.checkpoint_at if running.checkpoint_at is not None and running.checkpoint_at <= now else 0.0
        # The helper counts samples, not statistical progress: the rate is the frozen job's faster
        # steps before freezing's penalty (``frozen_throughput``), and its work in the same units, so
        # the report's time left is exact (its loop knows its length).
        scale = 1.0 / penalty(running.frozen, self.options.freeze_penalty)
        total = float(self.work[job_id - 1]) * scale
        # At least 0: a restarted or resuming job's work left includes its reload (or the node's boot).
        return JobProgress(job_id, "samples", done=max(0.0, total - running.left_at(now) * scale),
                           per_s=running.throughput * scale, frozen=running.frozen, time=now, checkpoint=checkpoint,
                           total=total)

    def _apply_one(self, action: Action) -> ActionResult:
        job = self._jobs.get(action.job_id)
        if job is None:
            return ActionResult(action, ActionError.JOB_GONE, "no such active job")
        on_running = self._RUNNING_HANDLERS.get(type(action))
        if on_running is not None and (job.state is JobState.RUNNING or type(action) not in self._HANDLERS):
            if job.state is not JobState.RUNNING:
                return ActionResult(action, ActionError.INVALID, f"job is {job.state.value}, not running")
            error = on_running(self, job, action)
            if error:
                return ActionResult(action, ActionError.INVALID, error)
            self._acted = True
            return ActionResult(action)
        if type(action) not in self._HANDLERS:
            return ActionResult(action, ActionError.INVALID, f"{type(action).__name__}: not modelled by the simulator")
        if not job.is_pending:
            return ActionResult(action, ActionError.NOT_PENDING, f"job is {job.state.value}")
        error = self._HANDLERS[type(action)](self, job, action)
        if error:
            return ActionResult(action, ActionError.INVALID, error)
        self._snapshot = None
        return ActionResult(action)

    def _set_start(self, job: Job, action: SetStartTime) -> None:
        self._update(job, eligible_time=action.start)
        self._requeue(job.job_id)
        return None

    def _set_gpus(self, job: Job, action: SetGpus) -> str | None:
        nodes = action.num_nodes if action.num_nodes is not None else job.num_nodes
        if not 1 <= action.gpus_per_node <= self.spec.gpus_per_node or not 1 <= nodes <= self.spec.nodes:
            return f"{nodes} x {action.gpus_per_node} GPUs does not fit nodes of {self.spec.gpus_per_node}"
        if self.spec.typed and nodes > int(self._type_nodes[job.gpu_type].sum()):
            return f"{nodes} nodes: the cluster has fewer of type {job.gpu_type}"
        job = self._unbound(job)
        self._share.pop(job.job_id, None)  # whole GPUs: no longer bound to a partner
        self._update(job, gpus_per_node=action.gpus_per_node, shards_per_node=0, num_nodes=nodes)
        self._requeue(job.job_id)
        self._schedule_needed = True
        return None

    def _set_nodes(self, job: Job, action: SetNodes) -> str | None:
        unknown = [n for n in action.nodes if n not in self._node_index]
        if unknown:
            return f"unknown nodes {unknown[:3]}"
        if self.spec.typed and not all(self._type_nodes[job.gpu_type][self._node_index[n]]
                                       for n in action.nodes):
            return f"nodes without {job.gpu_type} GPUs, which the job requested"  # Slurm refuses these too
        self._update(job, nodes=tuple(action.nodes))
        self._schedule_needed = True
        return None

    def _set_time_limit(self, job: Job, action: SetTimeLimit) -> str | None:
        if not action.seconds > 0:
            return f"time limit {action.seconds} s: not a positive duration"
        self._update(job, time_limit_s=commands.time_limit_minutes(action.seconds) * 60.0)  # as Slurm keeps it
        self._schedule_needed = True  # backfill reserves by the limit
        return None

    def _set_running_limit(self, job: Job, action: SetTimeLimit) -> str | None:
        """A running job's limit, as Slurm changes it: its EndTime (start + limit) and its end in
        backfill's profile move with it; it is the limit in force its run is judged by."""
        error = self._set_time_limit(job, action)
        if error is not None:
            return error
        job = self._jobs[job.job_id]
        seconds = job.time_limit_s or action.seconds
        running = self._running[job.job_id]
        running.limit_end = (job.start_time or self.clock.now()) + seconds
        self._hold_until(running)
        self._update(job, end_time=running.limit_end)
        self.record.time_limit[job.job_id - 1] = seconds
        return None

    def _hold(self, job: Job, action: Hold) -> None:
        self._update(job, held=True)
        self._requeue(job.job_id)
        return None

    def _release(self, job: Job, action: Release) -> None:
        self._update(job, held=False)
        self._requeue(job.job_id)
        return None

    def _set_decision(self, job: Job, action: SetDecision) -> None:
        self._update(job, comment=decision_token.replace_token(job.comment, action.token))
        return None

    def _set_gpu_freq(self, job: Job, action: SetGpuFreq) -> None:
        self._update(job, tres_freq=action.tres_freq)
        return None

    def _set_nice(self, job: Job, action: SetNice) -> None:
        self._update(job, nice=action.nice)
        return None

    def _share_gpus(self, job: Job, action: ShareGpus) -> str | None:
        """Bind the job to its partner: it starts on the partner's GPUs once the partner runs
        (alone, as asked, if it can start before; still on shards, as on Slurm) (``_shared_fields``)."""
        if action.with_job == job.job_id or action.with_job not in self._jobs:
            return f"job {action.with_job} is not another active job"
        bound = self._share.get(job.job_id)
        if bound is not None and bound[0] == action.with_job:
            return None  # already in force
        per_node, count = (bound[1], bound[2]) if bound is not None else (job.gpus_per_node, job.num_nodes)
        self._share[job.job_id] = (action.with_job, per_node, count)
        self._update(job, **_shared_fields(per_node))
        self._schedule_needed = True
        return None

    def _signal(self, job: Job, action: SignalJob) -> str | None:
        """The helper writes a whole checkpoint ``checkpoint_s`` from now and trains on."""
        if not self.elastic[job.job_id - 1]:
            return "the job runs no training helper: the signal would kill it"
        if action.signal.removeprefix("SIG") != "USR2":
            return f"SIG{action.signal.removeprefix('SIG')}: the simulated helper only checkpoints and trains on (USR2)"
        running = self._running[job.job_id]
        running.checkpoint_at = self.clock.now() + self.options.checkpoint_s
        running.checkpoint_left = running.left_at(running.checkpoint_at)
        return None

    def _requeue_hold(self, job: Job, action: RequeueHold) -> str | None:
        """Stop the job, held, delayed by Slurm's restart delay; it keeps its latest checkpoint's work."""
        running = self._running[job.job_id]
        if running.partner is not None:
            return "the job shares its GPUs: the simulator does not requeue one of a pair"
        now = self.clock.now()
        checkpointed = running.checkpoint_at is not None and running.checkpoint_at <= now
        left = running.checkpoint_left if checkpointed else running.saved_left
        self._restart_work[job.job_id] = left + self.options.restore_s * running.solo_throughput
        index = job.job_id - 1
        assert self.signal is not None  # only a running simulation has running jobs
        self.record.stopped(index, running.power_w * (running.end - now),
                            float(self.signal.mean_over(float(self.record.since[index]), now)))
        self._running.pop(job.job_id)
        self._release_gpus(job.job_id, running)
        # A former guest shows its shard (``_shared_fields``); shards exist here only as a binding to a
        # partner, which lapsed when it started, so it comes back on the whole GPU per node it asked for.
        whole = {"gpus_per_node": 1, "shards_per_node": 0} if job.gpus_per_node == 0 and job.shards_per_node else {}
        self._update(job, state=JobState.PENDING, start_time=None, end_time=None, nodes=(), held=True,
                     eligible_time=now + self.options.restart_delay_s, **whole)
        self.record.sample(now, self._busy(), self._fragmentation(), self._power_w, self._shared_gpus,
                           self._on_idle_nodes())
        return None

    #: Each action's handler by its type (it takes the action of that type): for a pending job,
    #: and for a running one.
    _HANDLERS: ClassVar[dict[type, Callable[[Simulator, Job, Any], str | None]]] = {
        SetStartTime: _set_start, SetGpus: _set_gpus, SetNodes: _set_nodes, SetTimeLimit: _set_time_limit,
        Hold: _hold, Release: _release,
        SetDecision: _set_decision, SetGpuFreq: _set_gpu_freq, SetNice: _set_nice, ShareGpus: _share_gpus}
    _RUNNING_HANDLERS: ClassVar[dict[type, Callable[[Simulator, Job, Any], str | None]]] = {
        SignalJob: _signal, RequeueHold: _requeue_hold, SetTimeLimit: _set_running_limit}

    def _unbound(self, job: Job) -> Job:
        """A job bound to a partner, as it asked (its whole GPUs), to start alone."""
        bound = self._share.get(job.job_id)
        return job if bound is None else _replace_job(job, {"gpus_per_node": bound[1], "shards_per_node": 0})

    def _update(self, job: Job, **changes: object) -> Job:
        new = _replace_job(job, changes)
        self._jobs[job.job_id] = new
        self._snapshot = None
        return new

    def _requeue(self, job_id: int) -> None:
        """Put a pending job in the eligible queue, or in the release heap, as its state says."""
        job = self._jobs[job_id]
        key = (job.submit_time, job_id)
        at = bisect.bisect_left(self._queue, key)
        queued = at < len(self._queue) and self._queue[at] == key
        now = self.clock.now()
        eligible = not job.held and (job.eligible_time is None or job.eligible_time <= now)
        if eligible and not queued:
            self._queue.insert(at, key)
            self._schedule_needed = True
        elif not eligible and queued:
            del self._queue[at]
        if not job.held and job.eligible_time is not None and job.eligible_time > now:
            heapq.heappush(self._releases, (job.eligible_time, job_id))

    # -- nodes -------------------------------------------------------------------------

    def _node(self, i: int) -> Node:
        """Node ``i`` as Slurm shows it: its GPU type only on a mixed cluster. On one type the
        nodes name none (untyped gres), so the controller asks its models for the registry's own
        type, the one the jobs run with here (``_runs_on``).

        Made once per node and set of free GPUs, then reused: every tick's snapshot asks again for
        the nodes that changed, and a node takes few such sets (at most 2 ** GPUs per node)."""
        key = (i, self.free[i].tobytes())
        node = self._node_views.get(key)
        if node is None:
            used = self.spec.gpus_per_node - int(self.free_count[i])
            state = NodeState.IDLE if used == 0 else (
                NodeState.ALLOCATED if used == self.spec.gpus_per_node else NodeState.MIXED)
            node = self._node_views[key] = Node(
                self.spec.node_name(i), state=state, gpus_total=self.spec.gpus_per_node, gpus_allocated=used,
                gpu_indices_allocated=tuple(np.flatnonzero(~self.free[i]).tolist()),
                gpu_type=self.spec.type_of(i) if self.spec.typed else None,
                features=(SWITCH_FEATURE + self.spec.switch_of(i),), partitions=(PARTITION,))
        return node

    def _fit(self, job: Job, free: np.ndarray, allowed: np.ndarray | None = None) -> list[int] | None:
        """The nodes ``job`` would take given ``free`` GPUs per node (and only ``allowed`` nodes):
        its node list, else the first nodes that fit in index order; None if it does not fit."""
        per_node, count = job.gpus_per_node, job.num_nodes
        if job.nodes:
            nodes = [self._node_index[n] for n in job.nodes]
            if len(nodes) != count or any(free[i] < per_node or (allowed is not None and not allowed[i])
                                          for i in nodes):
                return None
            return nodes
        ok = free >= per_node
        if allowed is not None:
            ok &= allowed
        if self.spec.typed:
            ok &= self._type_nodes[job.gpu_type]
        fitting = ok.nonzero()[0]
        return fitting[:count].tolist() if len(fitting) >= count else None

    def _allocate(self, job: Job, nodes: list[int]) -> list[tuple[int, np.ndarray]]:
        """``job``'s GPUs on ``nodes`` (as ``_fit`` chose them), taken."""
        per_node = job.gpus_per_node
        alloc = []
        for i in nodes:
            if self._power_saving is not None and self.free_count[i] == self._node_gpus[i]:
                self._resuming |= self._power_saving.busy(i, self.clock.now(), int(self._node_gpus[i]))
            slots = self._slots(i, per_node, aligned=bool(job.nodes))
            self.free[i, slots] = False
            self.free_count[i] -= per_node
            self._dirty_nodes.add(i)
            alloc.append((i, slots))
        self._free_total -= per_node * len(alloc)
        return alloc

    def _slots(self, i: int, k: int, aligned: bool) -> np.ndarray:
        """GPU indices on node ``i``: an aligned buddy block when the decision placed the job, else the lowest free."""
        gpn = self.spec.gpus_per_node
        if aligned and k & (k - 1) == 0 and gpn % k == 0:
            row = self.free[i].tolist()  # a node's few slots: a plain scan beats numpy's call overhead
            for start in range(0, gpn, k):
                if all(row[start: start + k]):
                    return np.arange(start, start + k)
        return np.flatnonzero(self.free[i])[:k]

    # -- the event loop ----------------------------------------------------------------

    def _arrive(self, index: int) -> None:
        """A trace job is submitted: job_submit.lua marks it and defers it to its deadline
        (``green_options.on_arrival``, the plugin's rule)."""
        w, o = self.workload, self.options
        job_id = index + 1
        submit = float(w.submit[index])
        per_node, nodes = self.submitted_layout(index)
        gpus = per_node * nodes
        admin_comment, begin = "", None  # unmanaged: no marker, no deferral
        if o.managed:
            low, high = self.gpu_range(gpus)
            green, begin = on_arrival(GreenOptions(managed=True, max_delay_s=o.flex_s, gpus_min=low, gpus_max=high,
                                                   accept_cap=o.accept_cap, accept_share=bool(self.shares[index]),
                                                   elastic=bool(self.elastic[index])),
                                      submit, time_limit_s=float(self.time_limit[index]))
            admin_comment = format_marker(green)
        self._jobs[job_id] = Job(
            job_id, name=w.job_type[index], user="trace", partition=PARTITION, submit_time=submit,
            eligible_time=begin, time_limit_s=float(self.time_limit[index]), num_nodes=nodes,
            gpus_per_node=per_node, gpu_type=self.requested_type[index], admin_comment=admin_comment)
        self._snapshot = None
        self._requeue(job_id)

    def _prolog_cap(self, job: Job) -> float:
        """The cap the job runs under: the Prolog's (``decision_token.signed_cap``, the rule
        ``gpu.enact.decided_cap`` applies; this site sets no default cap), or its ``--gpu-freq``
        level's when that is lower."""
        clocks = gpu_freq.cap_for_level(gpu_freq.level_of(job.tres_freq) or "high")
        cap = decision_token.signed_cap(job.comment, functools.partial(self._verify, job.job_id), None, _unlogged)
        return clocks if cap is None else min(clocks, cap)

    def _start(self, job: Job, alloc: list[tuple[int, np.ndarray]], now: float) -> None:
        index = job.job_id - 1
        cap = self._prolog_cap(job)
        gpus = job.total_gpus
        config = self._config(gpus, len(alloc), cap)
        gpu = self._runs_on(alloc)
        model = self._model(job.name, gpu)
        work = self._work_to_start(job.job_id)
        frozen, step = self._freezing(index, work)
        throughput = float(effective_rate(model, config, frozen, self.options.freeze_penalty))
        if self._resuming:  # a node it landed on resumes first: its GPUs are held meanwhile
            assert self._power_saving is not None
            work += self._power_saving.resume_s * throughput
            self._power_saving.resumes += 1
            self._resuming = False
        runtime = work / throughput
        power = float(frozen_power_w(model, config, frozen))
        end = now + runtime
        self.record.started(index, now, end, gpus, tuple(i for i, _ in alloc), cap, power * runtime, job.time_limit_s)
        # A freezing job's rate changes as it runs: its telemetry is not one configuration's.
        seen = None if self.freezes[index] else Observation(job.name or None, config, throughput, power, gpu=gpu)
        running = self._running[job.job_id] = _Running(gpus, alloc, now + (job.time_limit_s or runtime), seen,
                                                       throughput, power, throughput, power, now, end, work,
                                                       frozen=frozen, freeze_step=step, model=model, config=config)
        self._plan_freeze(job.job_id, running)
        self._hold_until(running)
        bound = self._share.pop(job.job_id, None)  # started alone: a binding to a partner lapses
        self._power_w += power
        # Like Slurm, a running job's EndTime is its start plus its time limit, not the truth.
        self._jobs[job.job_id] = _replace_job(job, dict(
            state=JobState.RUNNING, start_time=now, end_time=now + (job.time_limit_s or runtime),
            nodes=tuple(self.spec.node_name(i) for i, _ in alloc), **(_shared_fields(bound[1]) if bound else {})))
        heapq.heappush(self._completions, (end, job.job_id))
        self._snapshot = None

    def _work_to_start(self, job_id: int) -> float:
        """The work a job starting now has to do, alone or as a guest: a requeued job's from its
        checkpoint with the reload (taken), else all of it."""
        return self._restart_work.pop(job_id, float(self.work[job_id - 1]))

    def _complete(self, job_id: int) -> None:
        running = self._running.pop(job_id)
        if self._telemetry and running.seen is not None:
            self._observations.append(running.seen)
        self._ended[job_id] = _replace_job(self._jobs.pop(job_id), dict(state=JobState.COMPLETED,
                                                                         end_time=self.clock.now()))
        self._release_gpus(job_id, running)

    def _release_gpus(self, job_id: int, running: _Running) -> None:
        """What a job that stopped held: its end in backfill's profile, its power and its GPUs
        (unless it was a host whose guest takes them over)."""
        self._schedule_needed = True
        self._power_w -= running.power_w
        self._snapshot = None
        if running.partner is not None and self._unpair(running, running.partner):
            return  # the partner keeps the GPUs
        for i, slots in running.alloc:
            self.free[i, slots] = True
            self.free_count[i] += len(slots)
            self._free_total += len(slots)
            self._dirty_nodes.add(i)
            if self._power_saving is not None and self.free_count[i] == self._node_gpus[i]:
                self._power_saving.idle(i, self.clock.now())

    def _unpair(self, ended: _Running, partner: int) -> bool:
        """The partner of a job that ended returns to its solo rate and holds the GPUs; True
        when it took them over (the ended job was the host)."""
        other = self._running[partner]
        other.partner = None
        self._shared_gpus -= ended.gpus
        self._set_rate(partner, self.clock.now(), other.solo_throughput, other.solo_power_w)
        if ended.alloc and not other.alloc:
            other.alloc = ended.alloc
            self._hold_until(other)
            return True
        return False

    def _set_rate(self, job_id: int, now: float, throughput: float, power_w: float) -> None:
        """A running job's rate changes at ``now``: its work left, end, energy and completion follow;
        the stretch it drew its old power over is charged the intensity then."""
        r = self._running[job_id]
        r.work_left -= (now - r.since) * r.throughput
        remaining = max(0.0, r.work_left) / throughput
        index = job_id - 1
        if power_w != r.power_w:
            assert self.signal is not None  # only a running simulation has running jobs
            since = float(self.record.since[index])
            self.record.power_changed(index, now, r.power_w, float(self.signal.mean_over(since, now)))
        self.record.energy_j[index] += power_w * remaining - r.power_w * (r.end - now)
        self._power_w += power_w - r.power_w
        r.since, r.throughput, r.power_w, r.end = now, throughput, power_w, now + remaining
        self.record.end[index] = r.end
        heapq.heappush(self._completions, (r.end, job_id))  # the old entry goes stale
        self._plan_freeze(job_id, r)

    # -- layer freezing (the helper's ``Freezing``) ------------------------------------------

    def _freezing(self, index: int, work_left: float) -> tuple[float, int]:
        """A job's frozen share as it starts with ``work_left`` to do, and its next freezing
        step (``len(freeze_steps)``: none ahead, or the job does not freeze)."""
        steps = self.options.freeze_steps
        if not self.freezes[index]:
            return 0.0, len(steps)
        total = float(self.work[index])
        done = 1.0 - work_left / total if total > 0 else 1.0
        step = sum(1 for at, _ in steps if done >= at)
        return (steps[step - 1][1] if step else 0.0), step

    def _freeze_left(self, index: int, step: int) -> float | None:
        """The work left when freezing step ``step`` comes (None: there is none)."""
        steps = self.options.freeze_steps
        return float(self.work[index]) * (1.0 - steps[step][0]) if step < len(steps) else None

    def _plan_freeze(self, job_id: int, running: _Running) -> None:
        """When the job reaches its next freezing step at its rate now (an earlier plan goes stale)."""
        freeze_left = self._freeze_left(job_id - 1, running.freeze_step)
        if freeze_left is None:
            running.next_freeze = math.inf
            return
        running.next_freeze = running.since + max(0.0, running.work_left - freeze_left) / running.throughput
        heapq.heappush(self._freeze_steps, (running.next_freeze, job_id))

    def _freeze(self, job_id: int, now: float) -> None:
        """More of the job's blocks freeze: its rate and power (alone, and now) change by the
        freezing model's ratio at its configuration (a pair's slowdown is kept)."""
        r = self._running[job_id]
        assert r.model is not None and r.config is not None  # set at every start
        # The step whose time came is taken, however the work left rounds.
        frozen = self.options.freeze_steps[r.freeze_step][1]
        r.freeze_step += 1
        slope = self.options.freeze_penalty
        rate = effective_rate(r.model, r.config, frozen, slope) / effective_rate(r.model, r.config, r.frozen, slope)
        power = frozen_power_w(r.model, r.config, frozen) / frozen_power_w(r.model, r.config, r.frozen)
        r.frozen = frozen
        r.solo_throughput *= rate
        r.solo_power_w *= power
        self._set_rate(job_id, now, r.throughput * rate, r.power_w * power)

    def _join(self, now: float) -> None:
        """Start every bound, eligible job whose partner runs, on the partner's GPUs."""
        for job_id in list(self._share):
            job = self._jobs[job_id]
            key = (job.submit_time, job_id)
            at = bisect.bisect_left(self._queue, key)
            if at < len(self._queue) and self._queue[at] == key and self._joinable(job_id):
                del self._queue[at]
                self._start_guest(job, now)

    def _joinable(self, job_id: int) -> bool:
        """The job's partner runs alone on whole GPUs in the job's layout (pairs only: the
        co-location model is of pairs)."""
        partner_id, per_node, count = self._share[job_id]
        host = self._running.get(partner_id)
        return (host is not None and host.partner is None and len(host.alloc) == count
                and host.gpus == per_node * count)

    def _start_guest(self, job: Job, now: float) -> None:
        host_id, per_node, count = self._share.pop(job.job_id)
        host, host_job = self._running[host_id], self._jobs[host_id]
        index = job.job_id - 1
        cap = self._prolog_cap(job)
        config = self._config(host.gpus, count, cap)
        gpu = self._runs_on(host.alloc)
        model = self._model(job.name, gpu)
        work = self._work_to_start(job.job_id)
        frozen, step = self._freezing(index, work)
        solo_tput = float(effective_rate(model, config, frozen, self.options.freeze_penalty))
        solo_power = float(frozen_power_w(model, config, frozen))
        slow, slow_host, pair_w = self.models.colocation(
            job.name or None, host_job.name or None, gpu or self.spec.gpu_type, self.spec.share_mechanism,
            solo_power / host.gpus, host.solo_power_w / host.gpus, _pair_cap(cap, host.config))
        pair_total = pair_w * host.gpus
        power = pair_total * solo_power / (solo_power + host.solo_power_w)
        throughput = solo_tput / slow
        end = now + work / throughput
        self.record.started(index, now, end, host.gpus, tuple(i for i, _ in host.alloc), cap, power * (end - now),
                            job.time_limit_s)
        running = self._running[job.job_id] = _Running(host.gpus, [], now + (job.time_limit_s or end - now), None,
                                                       throughput, power, solo_tput, solo_power, now, end,
                                                       work, partner=host_id, frozen=frozen,
                                                       freeze_step=step, model=model, config=config)
        self._plan_freeze(job.job_id, running)
        self._jobs[job.job_id] = _replace_job(job, dict(
            state=JobState.RUNNING, start_time=now, end_time=running.limit_end, nodes=host_job.nodes,
            num_nodes=count, **_shared_fields(per_node)))
        heapq.heappush(self._completions, (end, job.job_id))
        self._power_w += power
        self._shared_gpus += host.gpus
        host.partner, host.seen = job.job_id, None
        self._set_rate(host_id, now, host.solo_throughput / slow_host, pair_total - power)
        self._snapshot = None

    def _hold_until(self, running: _Running) -> None:
        """Backfill expects the GPUs of ``running``'s allocation back at its time limit's end."""
        for i, slots in running.alloc:
            self._limit_end[i, slots] = running.limit_end

    def _free_profile(self, now: float) -> FreeProfile:
        """Backfill's profile at ``now``: every allocated GPU is freed at its job's time limit (now, if past)."""
        return FreeProfile(now, np.where(self.free, now, np.maximum(self._limit_end, now)))

    def _reserve(self, job: Job, held: Held, profile: FreeProfile) -> None:
        """Backfill's reservation for a blocked ``job``, on specific whole nodes, as Slurm makes one.

        The earliest time it fits, with running jobs ending by their time limits (``profile``)
        and the nodes of earlier reservations off limits while they overlap its own run, is
        found among the moments something frees (a time limit, a reservation's end), all at
        once; the nodes it would take then (the first in index order) are held. Beyond
        ``BACKFILL_WINDOW_S`` nothing is reserved.
        """
        times, rows = profile.candidates(held)
        pinned = [self._node_index[n] for n in job.nodes]
        limit = job.time_limit_s or 0.0
        typed = self.spec.typed and not job.nodes
        ready, room = profile.room(job.gpus_per_node, job.gpu_type if typed else None,
                                   self._type_nodes[job.gpu_type] if typed else None)
        # Before the nodes it needs have room (pinned, or the first count of them) it fits at no
        # time, reservations or not: the search starts there.
        first = ready[pinned].max() if pinned else np.partition(ready, job.num_nodes - 1)[job.num_nodes - 1]
        skip = int(rows.searchsorted(first))
        if skip == len(rows):
            return
        times, rows = times[skip:], rows[skip:]
        ok = room[rows]
        if held.count:
            ok &= held.free_over(times, limit)
        row = first_fit(ok, pinned, job.num_nodes)
        if row is not None:
            start = float(times[row])
            held.add(start, start + limit, pinned or ok[row].nonzero()[0][:job.num_nodes].tolist())

    def _schedule(self, now: float) -> None:
        """One pass of Slurm's scheduling over the eligible queue: FIFO, then backfill.

        Jobs start in queue order while they fit; a job that cannot start gets a reservation
        (``_reserve``: whole nodes, from its expected start for its time limit), and so does
        every later one that cannot (Slurm's backfill reserves for each job it tests, not
        only the first, up to ``BACKFILL_DEPTH``). A later job starts now only on nodes no
        reservation holds during its own time limit. Reservations are made lazily, when a
        later job could start now: until then nothing started, so they come out the same.
        A bound job whose partner starts in the pass joins it in the same pass, as Slurm starts
        a shard job, even when the partner took the last free GPU (a guest needs none).
        """
        self._schedule_needed = False
        if self._share:
            self._join(now)
        hosts_started = False
        free = self._free_total
        held: Held | None = None  # the pass's reservations, from its first (most passes make none)
        blocked: list[Job] = []  # passed over, not yet reserved for
        profile: FreeProfile | None = None
        shortest: list[float] = []  # the shortest time limit from each queue position on, once asked
        i = tested = removed = removed_before = 0  # jobs taken off the queue: in all, and when ``shortest`` was
        while i < len(self._queue) and free > 0 and tested < BACKFILL_DEPTH:
            job_id = self._queue[i][1]
            job = self._jobs[job_id]
            if job_id in self._share:
                if self._joinable(job_id):
                    del self._queue[i]
                    removed += 1
                    self._start_guest(job, now)
                    continue
                job = self._unbound(job)
            need = job.total_gpus
            tested += 1
            nodes = self._fit(job, self.free_count) if need <= free else None
            if nodes is not None:
                if blocked:
                    profile = profile or self._free_profile(now)
                    if held is None:
                        held = Held(self.spec.nodes)
                    for earlier in blocked:
                        self._reserve(earlier, held, profile)
                    blocked.clear()
                if held is not None and held.count:  # then only on nodes no reservation holds during its limit
                    nodes = self._fit(job, self.free_count, held.free_during(now, now + (job.time_limit_s or 0.0)))
                if nodes is not None:
                    self._start(job, self._allocate(job, nodes), now)
                    hosts_started = True
                    profile = None  # it holds GPUs until its own time limit
                    del self._queue[i]
                    removed += 1
                    free -= need
                    continue
                if held is not None and held.count and not self._share:
                    if not shortest or removed != removed_before:  # taken again once the queue changed
                        shortest, removed_before = self._shortest_limits(), removed
                    if self._backfill_closed(held, now, shortest[i + 1]):
                        return
            blocked.append(job)
            i += 1
        if hosts_started and self._share:
            self._join(now)  # guests of partners that just started (the pass may end with no GPU free)

    def _backfill_closed(self, held: Held, now: float, shortest_limit_s: float) -> bool:
        """Whether no job still queued can start in this pass: every node with a free GPU is
        held by a reservation at some time within the shortest time limit still queued. Reservations
        only grow within a pass, so it stays closed; the rest of the pass would only make
        reservations that no start can use (most of a busy simulation's time, before this ended it)."""
        unheld = held.free_during(now, now + shortest_limit_s)
        return unheld is not None and not (unheld & (self.free_count > 0)).any()

    def _shortest_limits(self) -> list[float]:
        """Per position in the queue, the shortest time limit of the jobs from there on (one more
        entry, infinite, past the end)."""
        out = [math.inf] * (len(self._queue) + 1)
        for k in range(len(self._queue) - 1, -1, -1):
            out[k] = min(out[k + 1], self._jobs[self._queue[k][1]].time_limit_s or 0.0)
        return out

    def _next_completion(self) -> float:
        """Earliest end of a running job still ahead (a rate change moves an end and leaves the old
        entry behind)."""
        return _live_head(self._completions, lambda end, job_id: getattr(self._running.get(job_id), "end", None) == end)

    def _next_freeze(self) -> float:
        """Earliest freezing step of a running job still ahead (a rate change re-plans it)."""
        return _live_head(self._freeze_steps,
                          lambda at, job_id: getattr(self._running.get(job_id), "next_freeze", None) == at)

    def _next_release(self) -> float:
        """Earliest valid begin time still ahead."""
        def live(at: float, job_id: int) -> bool:
            job = self._jobs.get(job_id)
            return job is not None and job.is_pending and not job.held and job.eligible_time == at
        return _live_head(self._releases, live)

    def run(self, controller: Ticking, *, min_tick_s: float = 300.0, max_tick_s: float = 900.0,
            drain_limit_s: float = 365 * 86400.0, on_progress: Callable[[int], None] | None = None,
            tick_while_running: bool = False) -> SimRecord:
        """Drive ``controller.tick(now)`` at events (at most every ``min_tick_s``) and at least every
        ``max_tick_s`` while jobs are pending (or, with ``tick_while_running``, for a controller
        that resizes running jobs, while any runs: a real one ticks on regardless); stop when
        every job is done, or ``drain_limit_s`` after the last arrival (the rest are reported
        unfinished)."""
        if self.signal is None:
            raise ValueError("a simulator without a carbon signal only sizes its jobs; it cannot run")
        signal = self.signal
        n = len(self.workload)
        submit = self.workload.submit
        last_tick = -math.inf
        changed = False
        done = 0
        stop_at = (float(submit[-1]) if n else 0.0) + drain_limit_s
        now = self.clock.now()
        self.record.sample(now, self._busy(), self._fragmentation(), self._power_w, self._shared_gpus,
                           self._on_idle_nodes())
        while True:
            arrival = float(submit[self._next_arrival]) if self._next_arrival < n else math.inf
            # Only live entries: a stale one would wake the loop for nothing and, after the last job,
            # carry the run's end (and the idle GPUs' energy to it) to where a moved end used to be.
            completion = self._next_completion()
            freezing = self._next_freeze()
            pending = len(self._jobs) > len(self._running) or (tick_while_running and bool(self._running))
            if changed:
                tick = max(last_tick + min_tick_s, now)
            else:
                tick = last_tick + max_tick_s if pending else math.inf
            nxt = min(arrival, completion, freezing, self._next_release(), tick)
            if nxt == math.inf or nxt > stop_at:
                break
            now = max(now, nxt)
            self.clock.set(now)
            nodes_changed = froze = False
            while self._freeze_steps and self._freeze_steps[0][0] <= now:
                at, job_id = heapq.heappop(self._freeze_steps)
                running = self._running.get(job_id)
                if running is not None and running.next_freeze == at:
                    self._freeze(job_id, now)
                    froze = True
            while self._completions and self._completions[0][0] <= now:
                end, job_id = heapq.heappop(self._completions)
                running = self._running.get(job_id)
                if running is None or running.end != end:
                    continue  # moved by a rate change
                self._complete(job_id)
                done += 1
                changed = nodes_changed = True
            while self._next_arrival < n and submit[self._next_arrival] <= now:
                self._arrive(self._next_arrival)
                self._next_arrival += 1
                changed = True
            while self._releases and self._releases[0][0] <= now:
                job_id = heapq.heappop(self._releases)[1]
                if job_id in self._jobs and self._jobs[job_id].is_pending:
                    self._requeue(job_id)
            if now >= tick or (changed and now >= last_tick + min_tick_s):
                controller.tick(now)
                last_tick, changed = now, self._acted  # a job signalled or requeued: look again soon
                self._acted = False
                if self._ended:  # seen once, then gone from squeue
                    self._ended.clear()
                    self._snapshot = None
            started = len(self._running)
            if self._schedule_needed:
                self._schedule(now)
            if nodes_changed or froze or len(self._running) != started:
                self.record.sample(now, self._busy(), self._fragmentation(), self._power_w, self._shared_gpus,
                           self._on_idle_nodes())
            if on_progress is not None and nodes_changed:
                on_progress(done)
        if self._power_saving is not None:
            self._power_saving.close(now, self._node_gpus)
            self.record.suspended, self.record.resumes = self._power_saving.suspended, self._power_saving.resumes
        self.record.finish(signal, self.spec, now)
        return self.record

    def _busy(self) -> int:
        return self.spec.gpus - self._free_total

    def _on_idle_nodes(self) -> int:
        """GPUs of nodes with nothing allocated: what Slurm's power saving would suspend."""
        idle = self.free_count == self._node_gpus
        return int(self._node_gpus[idle].sum())

    def _fragmentation(self) -> float:
        return fragmentation(self.free_count, self._node_gpus)


@dataclass(frozen=True)
class SimProgress:
    """The simulated jobs' progress reports, where the resizer reads them
    (``controller.resize.ProgressSource``; on a site: ``controller.progress.ProgressReader``)."""

    sim: Simulator

    def read(self, job_id: int, user: str, now: float) -> JobProgress | None:
        return self.sim.progress_of(job_id, now)

    def forget_ended(self, active: Collection[int], now: float) -> int:
        """Nothing to drop: a simulated report is made when read, never kept."""
        return 0


def _live_head(heap: list[tuple[float, int]], live: Callable[[float, int], bool]) -> float:
    """The time of ``heap``'s earliest (time, job id) entry that ``live`` accepts, popping the stale
    ones before it (entries are validated lazily); inf when none is left."""
    while heap:
        at, job_id = heap[0]
        if live(at, job_id):
            return at
        heapq.heappop(heap)
    return math.inf
