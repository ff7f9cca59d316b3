"""Resizing a running elastic job: checkpoint, requeue, restart at another GPU count.

Slurm cannot change a running job's GPUs. A job that opted in (``green:elastic=requeue``,
marked by job_submit.lua) and runs the training helper (``slurm_green.train``) is resized
in three steps, each a tick or more apart and each stored before the next, so a killed
controller goes on where it was:

1. **signalled**: ``scancel --signal=USR2`` (``SignalJob``). The helper writes a checkpoint at
   its next step, says so in its progress report (``JobProgress.checkpoint``) and trains on.
2. **requeued**: once the report names a checkpoint written after the signal, ``scontrol
   requeuehold``: the job stops and waits in the queue, held. No checkpoint within
   ``checkpoint_timeout_s`` (a job that ignores the signal, or runs no helper): the resize
   is abandoned and the job runs on at its size, having lost nothing. A requeue whose outcome
   is unknown (a command that timed out; a controller killed before it stored the outcome)
   is looked at again: a job found pending and held after its checkpoint was requeued by
   this resize and goes on to step 3 (nothing else would release it); one still stopping
   (COMPLETING, or a flag alone such as REQUEUED, read as OTHER) is waited for, as after a
   recorded requeue (a flag alone for at most ``checkpoint_timeout_s``, then the resize is
   abandoned with a note saying to release the job by hand); one still running is
   sent the requeue again, until ``checkpoint_timeout_s`` after the signal.
3. **done**: once the job is pending, its new GPU count (``SetGpus``) and ``scontrol
   release``. The release goes even if the count was refused: the job restarts at its old
   size from its checkpoint. A shrink raises the job's time limit with it (``shrunk_limit``),
   or Slurm could stop the smaller job at the limit its user set for the larger one. Slurm
   delays a requeued job's start by itself (about two minutes, BeginTime: seen on 24.11),
   so a restart never races its own old processes.

From the signal until it runs again, the job belongs to its resize: the planner leaves it
alone, so no policy decision undoes a size in flight. The work done between the
checkpoint and the requeue (at most about one tick) is done again. Bounded: at most
``max_attempts`` resizes per job, at least ``min_interval_s`` apart, and only to a GPU
count within the range the user allowed (``gpus=MIN-MAX``), and at most one shrink in flight
(a policy that shrinks a job for the head of the queue asks again each tick until the GPUs
are free; a second job is not shrunk for the same need). Which jobs to resize, and
to what, is the policy's: a ``JobDecision`` for a running job whose count differs from
the one it runs with (``policy/running.py``).

The reports also say how fast the job goes at its size: ``reports`` keeps each settled one
(``settle_s`` after the job's start, none while a checkpoint is asked for) and ``record``
adds its rate to the job's mean at that GPU count in the store (``rates``), so a job that ran
at two counts is rated by how it really scaled (``measured``; ``models/measured.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from slurm_green.controller.store import Row, StateStore
from slurm_green.core.actions import Action, ActionError, ActionResult, Release, RequeueHold, SetGpus, SetTimeLimit, SignalJob
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState
from slurm_green.core.green_options import parse_marker
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.core.progress import JobProgress, MeasuredRate
from slurm_green.core.time_limit import asked_limit, partition_limits, partition_max_times, whole_minutes_s

log = logging.getLogger(__name__)

SIGNALLED, REQUEUED, DONE, ABANDONED = "signalled", "requeued", "done", "abandoned"
#: What a requeued job shows while Slurm stops it: COMPLETING, or a flag alone (REQUEUED, read as
#: OTHER). A signalled job seen so may have been requeued by its resize (an unrecorded outcome).
_STOPPING = frozenset({JobState.COMPLETING, JobState.OTHER})


class ProgressSource(Protocol):
    """Where the jobs' own progress reports are read (``controller.progress.ProgressReader``)."""

    def read(self, job_id: int, user: str, now: float) -> JobProgress | None: ...

    def forget_ended(self, active: Collection[int], now: float) -> int:
        """Drop what is kept of the reports of jobs not in ``active``; how many were dropped."""


@dataclass(frozen=True)
class ResizeSettings:
    """``[elastic]`` of the controller's configuration."""

    signal: str = "USR2"
    #: Signal the batch script's shell (``scancel --batch``) instead of the job's steps.
    signal_batch: bool = False
    checkpoint_timeout_s: float = 600.0
    max_attempts: int = 3
    min_interval_s: float = 3600.0
    #: Keep the rates the reports give at each GPU count (``Resizer.measured``), so the policy
    #: rates a job that was resized by how it really scaled (``models/measured.py``).
    learn_scaling: bool = True
    #: A report counts towards a rate only this long after the job (re)started: the first
    #: steps (loading, compiling, warming caches) are not its pace.
    settle_s: float = 300.0


def elastic(job: Job) -> bool:
    """Opted in to checkpoint-and-requeue, as job_submit.lua recorded (never the user's comment)."""
    options = parse_marker(job.admin_comment)
    return bool(options and options.managed and options.elastic)


def _target(job: Job, decision: JobDecision) -> tuple[int, int] | None:
    """(GPUs per node, nodes) the decision asks of running ``job``, if it differs from what the
    job runs with and lies within the user's range; None otherwise."""
    options = parse_marker(job.admin_comment)
    per_node = decision.gpus_per_node if decision.gpus_per_node is not None else job.gpus_per_node
    nodes = decision.num_nodes if decision.num_nodes is not None else job.num_nodes
    if options is None or per_node < 1 or nodes < 1 or (per_node, nodes) == (job.gpus_per_node, job.num_nodes):
        return None
    low, high = options.running_gpu_bounds(job.total_gpus)
    return (per_node, nodes) if low <= per_node * nodes <= high else None


def shrunk_limit(job: Job, gpus: int, limits: Mapping[str, float | None], max_time_s: float | None) -> list[Action]:
    """The time limit for ``job`` restarting on ``gpus`` GPUs, fewer than it ran on, if its
    limit now is shorter.

    The restart runs the rest of its work; on fewer GPUs that takes at most (GPUs before /
    GPUs after) as long as all of it would have, when its throughput grows no faster than
    its GPU count (no super-linear scaling, as ``models/scaling.py`` fits it; a job that
    really scales super-linearly could still outrun the raise). So the limit becomes the
    limit as submitted (``time_limit.limit_as_submitted``, which no raise of the
    controller's moves) times that ratio, whole minutes, never above the partition's
    ``MaxTime`` and never lowered. Anchored on the limit as submitted, a step sent again (a
    release that failed, retried next tick) asks for the same limit, not a larger one.
    Nothing for a job without a limit, nor for a grow. A shrink whose limit would pass
    ``MaxTime`` is not started (``Resizer.plan``)."""
    wanted = _shrunk_limit_s(job, gpus, limits)
    if wanted is None:
        return []
    if max_time_s:
        wanted = min(wanted, max_time_s)
    current = job.time_limit_s
    if current is not None and current >= wanted:
        return []
    return [SetTimeLimit(job.job_id, wanted)]


def _shrunk_limit_s(job: Job, gpus: int, limits: Mapping[str, float | None]) -> float | None:
    """The limit as submitted scaled to ``gpus`` GPUs (fewer than it runs on), whole minutes;
    None without a known limit or for a grow (see ``shrunk_limit``)."""
    asked = asked_limit(job, limits)
    if asked is None or not 0 < gpus < job.total_gpus:
        return None
    return whole_minutes_s(asked * job.total_gpus / gpus)


def _past_max_time(job: Job, gpus: int, limits: Mapping[str, float | None], max_time_s: float | None) -> bool:
    """Whether the shrink to ``gpus`` needs a limit past the partition's ``MaxTime`` (and the job's
    limit now): the requeued job's limit cannot pass it (a pending job over it would not start),
    so Slurm would stop it there, its work since the last checkpoint lost; no such shrink is started."""
    wanted = _shrunk_limit_s(job, gpus, limits)
    return bool(max_time_s) and wanted is not None and wanted > max(max_time_s or 0.0, job.time_limit_s or 0.0)


@dataclass
class Resizer:
    """The three steps above, over the store's ``resizes`` table. ``plan`` reads and proposes;
    ``record`` writes the outcome of what was enacted (a dry run never calls it)."""

    store: StateStore
    progress: ProgressSource
    settings: ResizeSettings = field(default_factory=ResizeSettings)
    #: What this tick's ``plan`` proposed, for ``record``: new resizes' targets, why others end,
    #: and the requeued jobs it releases (so ``record`` tells them from any other job's release).
    _targets: dict[int, tuple[int, int]] = field(default_factory=dict, repr=False)
    _abandoned: dict[int, str] = field(default_factory=dict, repr=False)
    _releasing: set[int] = field(default_factory=set, repr=False)
    #: The settled reports ``reports`` read this tick, with the GPU count each ran at, for ``record``.
    _readings: list[tuple[int, int, JobProgress]] = field(default_factory=list, repr=False)
    #: The jobs ``plan`` found signalled (their checkpoint slows them: no reading of theirs is kept).
    _signalled: set[int] = field(default_factory=set, repr=False)

    def plan(self, snapshot: ClusterSnapshot, plan: Plan, now: float) -> tuple[list[Action], set[int], list[str]]:
        """This tick's resize actions, the jobs the resizes own (the planner skips them) and notes."""
        rows = self.store.resizes()
        actions: list[Action] = []
        owned: set[int] = set()
        notes: list[str] = []
        self._targets, self._abandoned, self._releasing = {}, {}, set()
        self._signalled = {job_id for job_id, row in rows.items() if row["phase"] == SIGNALLED}
        limits = partition_limits(snapshot)
        max_time = partition_max_times(snapshot)
        for job_id, row in rows.items():
            job = snapshot.job(job_id)
            step = self._next_step(job, row, now, limits, max_time)
            if isinstance(step, str):
                self._abandoned[job_id] = step
                notes.append(f"job {job_id}: resize abandoned: {step}")
                log.warning("job %s: resize abandoned: %s", job_id, step)
                continue
            if step is not None:
                actions.extend(step)
                if any(isinstance(action, Release) for action in step):
                    self._releasing.add(job_id)
            if row["phase"] in (SIGNALLED, REQUEUED) or (row["phase"] == DONE and job is not None and job.is_pending):
                owned.add(job_id)
        shrinking = any(row["phase"] in (SIGNALLED, REQUEUED) and (job := snapshot.job(job_id)) is not None
                        and row["gpus_per_node"] * row["num_nodes"] < job.total_gpus
                        for job_id, row in rows.items() if job_id not in self._abandoned)
        for decision in plan.decisions:
            job = snapshot.job(decision.job_id)
            if job is None or job.state is not JobState.RUNNING or job.job_id in owned or not elastic(job):
                continue
            target = _target(job, decision)
            if target is None or not self._may_start(rows.get(job.job_id), now):
                continue
            shrink = target[0] * target[1] < job.total_gpus
            if shrink and shrinking:
                continue
            if shrink and _past_max_time(job, target[0] * target[1], limits, max_time.get(job.partition)):
                notes.append(f"job {job.job_id}: not shrunk to {target[0] * target[1]} GPUs: its time limit "
                             f"would have to pass its partition's MaxTime")
                continue
            shrinking = shrinking or shrink
            self._targets[job.job_id] = target
            actions.append(SignalJob(job.job_id, self.settings.signal, self.settings.signal_batch))
            owned.add(job.job_id)
            notes.append(f"job {job.job_id}: resize {job.total_gpus} -> {target[0] * target[1]} GPUs: "
                         f"asking for a checkpoint (SIG{self.settings.signal})")
        return actions, owned, notes

    def reports(self, snapshot: ClusterSnapshot, now: float) -> dict[int, JobProgress]:
        """The latest progress reports of the running elastic jobs, for the policy's context."""
        self.progress.forget_ended({job.job_id for job in snapshot.jobs if job.state.is_active}, now)
        found = {}
        self._readings = []
        for job in snapshot.jobs:
            if job.state is JobState.RUNNING and elastic(job):
                report = self.progress.read(job.job_id, job.user, now)
                if report is not None:
                    found[job.job_id] = report
                    if self._settled(job, report):
                        self._readings.append((job.job_id, job.total_gpus, report))
        return found

    def measured(self, snapshot: ClusterSnapshot) -> dict[int, tuple[MeasuredRate, ...]]:
        """The rates kept of the running elastic jobs, by GPU count (``learn_scaling``), for the
        policy's context; only a job measured at two counts tells how it scales."""
        if not self.settings.learn_scaling:
            return {}
        return self.store.rates(job.job_id for job in snapshot.jobs
                                if job.state is JobState.RUNNING and elastic(job))

    def _settled(self, job: Job, report: JobProgress) -> bool:
        """Whether ``report``'s rate is the pace of ``job`` on its one node: a rate, measured
        ``settle_s`` or more after the job (re)started."""
        return (self.settings.learn_scaling and report.per_s > 0 and job.num_nodes == 1
                and job.start_time is not None and report.time - job.start_time >= self.settings.settle_s)

    def _may_start(self, row: Row | None, now: float) -> bool:
        if row is None:
            return True
        return row["attempts"] < self.settings.max_attempts and now - row["updated_at"] >= self.settings.min_interval_s

    def _next_step(self, job: Job | None, row: Row, now: float, limits: Mapping[str, float | None],
                   max_time: Mapping[str, float | None]) -> list[Action] | str | None:
        """The actions that move ``row`` on, None to wait, or why it is abandoned (``limits``:
        ``time_limit.partition_limits``; ``max_time``: each partition's ``MaxTime``)."""
        phase = row["phase"]
        if phase == SIGNALLED:
            report = self.progress.read(job.job_id, job.user, now) if job is not None else None
            checkpointed = report is not None and report.checkpoint >= row["signalled_at"]
            if job is not None and job.is_pending and job.held and checkpointed:
                # Requeued and held after its checkpoint: this resize's RequeueHold took effect, but
                # its outcome was never stored (a controller killed before ``record``, or a command
                # that timed out and still went through). Only this resize will release it.
                log.warning("job %s: found requeued and held after its checkpoint; resuming its resize", job.job_id)
                return self._restart(job, row, limits, max_time)
            if job is not None and job.state in _STOPPING:
                # Stopping: most likely requeued by this resize's RequeueHold, its outcome never
                # stored; ending it here would leave the job held for good once Slurm shows it
                # pending. Wait: the pending-and-held case above resumes it, an end ends it.
                since = max(row["updated_at"], report.checkpoint if report is not None and checkpointed else 0.0)
                return self._stopping(job, since, now, "its checkpoint (or signal), requeue unrecorded")
            if job is None or job.state is not JobState.RUNNING:
                return f"the job is {job.state.value if job else 'gone'} before its checkpoint came: not requeued"
            retried = row["updated_at"] > row["signalled_at"]  # a requeue whose outcome was unknown (``record``)
            if now - row["signalled_at"] > self.settings.checkpoint_timeout_s and (retried or not checkpointed):
                return (f"no {'requeue' if retried else 'checkpoint'} within {self.settings.checkpoint_timeout_s:.0f}"
                        f" s of the signal: the job runs on at its size, not requeued")
            return [RequeueHold(job.job_id)] if checkpointed else None
        if phase == REQUEUED:
            if job is not None and job.state is JobState.OTHER:  # a flag alone (REQUEUED): still stopping
                return self._stopping(job, row["updated_at"], now, "its requeue")
            if job is None or not job.state.is_active:
                return f"the job is {job.state.value if job else 'gone'} after its requeue"
            if not job.is_pending:
                return None  # still completing; a requeued job is pending once its processes are gone
            return self._restart(job, row, limits, max_time)
        return None

    def _stopping(self, job: Job, since: float, now: float, what: str) -> str | None:
        """Wait (None) for ``job``, requeued (or maybe so) and still stopping, to show as pending;
        COMPLETING ends by itself. A state Slurm names only by a flag (OTHER: REQUEUED, ...) is
        waited for ``checkpoint_timeout_s`` from ``since``, then the resize is abandoned, saying so."""
        if job.state is not JobState.OTHER or now - since <= self.settings.checkpoint_timeout_s:
            return None
        return (f"the job is still {job.state.value} (stopping?) {now - since:.0f} s after {what}: not released;"
                f" if Slurm shows it pending and held, release it by hand (scontrol release {job.job_id})")

    @staticmethod
    def _restart(job: Job, row: Row, limits: Mapping[str, float | None], max_time: Mapping[str, float | None]) -> list[Action]:
        """Step 3 for a requeued, pending job: its new GPU count (and a shrink's limit), then its release."""
        step: list[Action] = []
        if (row["gpus_per_node"], row["num_nodes"]) != (job.gpus_per_node, job.num_nodes):
            step.append(SetGpus(job.job_id, row["gpus_per_node"], row["num_nodes"]))
            step += shrunk_limit(job, row["gpus_per_node"] * row["num_nodes"], limits, max_time.get(job.partition))
        return [*step, Release(job.job_id)]

    def record(self, now: float, actions: Sequence[Action], results: Sequence[ActionResult]) -> None:
        """Move each resize on by the outcome of its enacted step (and end those ``plan`` gave up),
        and keep the rates this tick's reports gave."""
        self.store.record_rates(r for r in self._readings if r[0] not in self._signalled)
        for job_id, why in self._abandoned.items():
            self.store.record_resize(job_id, ABANDONED, now, why)
        for action, result in zip(actions, results, strict=True):
            job_id = action.job_id
            if isinstance(action, SignalJob) and job_id in self._targets:
                target = self._targets[job_id]
                if result.ok:
                    self.store.record_resize(job_id, SIGNALLED, now, f"to {target[0]} x {target[1]} GPUs: signalled",
                                             attempt=target)
                else:  # an attempt all the same: max_attempts bounds a signal that always fails
                    self.store.record_resize(job_id, ABANDONED, now, f"signal failed: {result.message}",
                                             attempt=target)
            elif isinstance(action, RequeueHold):
                if result.ok:
                    self.store.record_resize(job_id, REQUEUED, now, "checkpointed; requeued, held")
                elif result.error is ActionError.UNREACHABLE:  # it may have gone through: ``plan`` looks again
                    self.store.record_resize(job_id, SIGNALLED, now, f"requeue outcome unknown: {result.message}")
                else:  # the job runs on (or ended) at its size: nothing was lost
                    self.store.record_resize(job_id, ABANDONED, now, f"requeue failed: {result.message}")
            elif isinstance(action, SetGpus) and not result.ok and job_id in self._releasing:
                log.warning("job %s: new GPU count refused (%s); released at its old size", job_id, result.message)
            elif isinstance(action, Release) and job_id in self._releasing:
                if result.ok:
                    self.store.record_resize(job_id, DONE, now, "released at its new size")
                else:  # still held: the next tick releases it again
                    log.warning("job %s: release after requeue failed (%s); retried next tick", job_id,
                                result.message)
