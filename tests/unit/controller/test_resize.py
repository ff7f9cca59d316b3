"""The resize of a running elastic job, step by step, over a real store and real progress files.

Each test drives ``Resizer.plan`` / ``record`` as the tick does, with the outcomes Slurm would
give; the live cluster runs the same steps in tests/integration/controller/test_resize_live.py.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from slurm_green.controller.progress import ProgressReader
from slurm_green.controller.resize import ABANDONED, DONE, REQUEUED, SIGNALLED, Resizer, ResizeSettings
from slurm_green.controller.store import StateStore
from slurm_green.controller.tick import Controller
from slurm_green.core.actions import ActionError, ActionResult, Release, RequeueHold, SetGpus, SetTimeLimit, SignalJob
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState, Partition
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.core.progress import JobProgress, MeasuredRate
from slurm_green.train.progress import write

NOW = 1_790_000_000.0
GROW = Plan(decisions=(JobDecision(7, gpus_per_node=2, num_nodes=1),))


def job(state: JobState = JobState.RUNNING, gpus: int = 1, elastic: bool = True, high: int = 4, **changes) -> Job:
    marker = format_marker(GreenOptions(gpus_min=1, gpus_max=high, elastic=elastic))
    return replace(Job(7, user="alice", state=state, gpus_per_node=gpus, nodes=("node1",), admin_comment=marker),
                   **changes)


def snap(*jobs: Job) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=NOW, jobs=jobs)


@pytest.fixture
def resizer(tmp_path) -> Resizer:
    store = StateStore(tmp_path / "state.db")
    reader = ProgressReader(tmp_path, uid=lambda user: os.getuid())
    return Resizer(store, reader, ResizeSettings(checkpoint_timeout_s=300, max_attempts=2, min_interval_s=3600))


def step(resizer: Resizer, snapshot: ClusterSnapshot, now: float, plan: Plan = Plan(), fail: set[type] = frozenset()):
    """One tick's resize actions, enacted with the outcomes given (a type in ``fail`` fails)."""
    actions, owned, _ = resizer.plan(snapshot, plan, now)
    results = [ActionResult(a, ActionError.OTHER, "refused") if type(a) in fail else ActionResult(a)
               for a in actions]
    resizer.record(now, actions, results)
    return actions, owned


def checkpointed(tmp_path, at: float) -> None:
    write(tmp_path, JobProgress(7, "samples", 100.0, 10.0, 0.0, at, checkpoint=at))


def phase(resizer: Resizer) -> str:
    return resizer.store.resizes()[7]["phase"]


def test_signal_checkpoint_requeue_then_new_size_and_release(resizer, tmp_path) -> None:
    actions, owned = step(resizer, snap(job()), NOW, GROW)
    assert actions == [SignalJob(7, "USR2", False)] and owned == {7} and phase(resizer) == SIGNALLED
    # no checkpoint yet (an old one does not count): wait, the planner keeps off the job
    checkpointed(tmp_path, NOW - 50)
    assert step(resizer, snap(job()), NOW + 60, GROW) == ([], {7})
    checkpointed(tmp_path, NOW + 90)
    assert step(resizer, snap(job()), NOW + 120, GROW) == ([RequeueHold(7)], {7}) and phase(resizer) == REQUEUED
    # Slurm is still stopping it: wait
    assert step(resizer, snap(job(JobState.COMPLETING)), NOW + 130) == ([], {7})
    pending = job(JobState.PENDING, held=True)
    assert step(resizer, snap(pending), NOW + 180) == ([SetGpus(7, 2, 1), Release(7)], {7})
    assert phase(resizer) == DONE
    # released, waiting for Slurm's restart delay: still the resize's, nothing more to do
    assert step(resizer, snap(job(JobState.PENDING, gpus=2)), NOW + 240) == ([], {7})
    assert step(resizer, snap(job(gpus=2)), NOW + 400) == ([], set())


def test_a_job_that_never_checkpoints_is_left_running_and_not_retried_soon(resizer) -> None:
    step(resizer, snap(job()), NOW, GROW)
    assert step(resizer, snap(job()), NOW + 200, GROW)[0] == []
    actions, owned = step(resizer, snap(job()), NOW + 301, GROW)
    assert actions == [] and phase(resizer) == ABANDONED
    assert "no checkpoint within 300 s" in resizer.store.resizes()[7]["note"]
    assert step(resizer, snap(job()), NOW + 1000, GROW) == ([], set())           # min_interval_s
    assert step(resizer, snap(job()), NOW + 301 + 3600, GROW)[0] == [SignalJob(7, "USR2", False)]
    step(resizer, snap(job()), NOW + 301 + 3600 + 301, GROW)                       # abandoned again
    assert step(resizer, snap(job()), NOW + 20_000, GROW) == ([], set())         # max_attempts = 2


def test_a_refused_count_still_releases_the_job_at_its_old_size(resizer, tmp_path) -> None:
    step(resizer, snap(job()), NOW, GROW)
    checkpointed(tmp_path, NOW + 10)
    step(resizer, snap(job()), NOW + 60)
    actions, _ = step(resizer, snap(job(JobState.PENDING, held=True)), NOW + 120, fail={SetGpus})
    assert actions == [SetGpus(7, 2, 1), Release(7)] and phase(resizer) == DONE


def test_a_failed_requeue_or_release_loses_no_job(resizer, tmp_path) -> None:
    step(resizer, snap(job()), NOW, GROW)
    checkpointed(tmp_path, NOW + 10)
    step(resizer, snap(job()), NOW + 60, fail={RequeueHold})
    assert phase(resizer) == ABANDONED                  # it runs on at its size
    # a release that fails is sent again next tick, the job stays the resize's
    resizer.store.record_resize(7, REQUEUED, NOW + 100, "test")
    held = snap(job(JobState.PENDING, held=True))
    step(resizer, held, NOW + 120, fail={Release})
    assert phase(resizer) == REQUEUED
    assert step(resizer, held, NOW + 180)[0][-1] == Release(7) and phase(resizer) == DONE


def test_a_requeue_that_went_through_unrecorded_is_resumed_and_the_job_released(resizer, tmp_path) -> None:
    """The controller killed between ``scontrol requeuehold`` and storing it: the next tick
    finds the job pending and held after its checkpoint, so the requeue was this resize's."""
    step(resizer, snap(job()), NOW, GROW)
    checkpointed(tmp_path, NOW + 10)
    actions, _, _ = resizer.plan(snap(job()), Plan(), NOW + 60)
    assert actions == [RequeueHold(7)]  # enacted, and never recorded
    held = snap(job(JobState.PENDING, held=True))
    assert step(resizer, held, NOW + 120) == ([SetGpus(7, 2, 1), Release(7)], {7}) and phase(resizer) == DONE


UNREACHABLE = ActionResult(RequeueHold(7), ActionError.UNREACHABLE, "Socket timed out")


def requeue_of_unknown_outcome(resizer: Resizer, tmp_path) -> None:
    """Signalled at NOW, checkpointed, and the requeue sent at NOW + 60 timed out (unreachable)."""
    step(resizer, snap(job()), NOW, GROW)
    checkpointed(tmp_path, NOW + 10)
    actions, _, _ = resizer.plan(snap(job()), Plan(), NOW + 60)
    resizer.record(NOW + 60, actions, [UNREACHABLE])
    assert actions == [RequeueHold(7)] and phase(resizer) == SIGNALLED  # it may have gone through


def test_a_requeue_of_unknown_outcome_that_went_through_is_resumed(resizer, tmp_path) -> None:
    requeue_of_unknown_outcome(resizer, tmp_path)
    assert step(resizer, snap(job(JobState.PENDING, held=True)), NOW + 120)[0] == [SetGpus(7, 2, 1), Release(7)]
    assert phase(resizer) == DONE


def test_a_requeue_of_unknown_outcome_that_did_not_go_through_is_retried_until_the_checkpoint_timeout(
        resizer, tmp_path) -> None:
    requeue_of_unknown_outcome(resizer, tmp_path)
    actions, _, _ = resizer.plan(snap(job()), Plan(), NOW + 120)
    resizer.record(NOW + 120, actions, [UNREACHABLE])
    assert actions == [RequeueHold(7)] and phase(resizer) == SIGNALLED
    assert step(resizer, snap(job()), NOW + 301) == ([], set())  # 300 s after the signal: it runs on at its size
    assert phase(resizer) == ABANDONED


def test_a_job_held_before_its_checkpoint_is_not_released_by_the_resize(resizer) -> None:
    """Held by someone else (an administrator) before any checkpoint: not this resize's hold."""
    step(resizer, snap(job()), NOW, GROW)
    assert step(resizer, snap(job(JobState.PENDING, held=True)), NOW + 60) == ([], set())
    assert phase(resizer) == ABANDONED


def released_eventually(resizer: Resizer, start: float) -> bool:
    """Whether ticks every minute after ``start`` that see the job pending and held release it."""
    held = snap(job(JobState.PENDING, held=True))
    return any(Release(7) in step(resizer, held, start + 60 * i)[0] for i in range(1, 30))


@pytest.mark.parametrize("stopping", [JobState.COMPLETING, JobState.OTHER])  # OTHER: the REQUEUED flag alone
@pytest.mark.parametrize("unknown", [False, True])
def test_a_requeue_that_went_through_unrecorded_is_resumed_though_first_seen_stopping(
        resizer, tmp_path, stopping, unknown) -> None:
    """Reviewer's repro: the controller killed after ``scontrol requeuehold`` went through
    (``unknown``: the command timed out and still took); its next tick sees the job still
    stopping. Abandoned there, the job then pending and held would be held for good."""
    if unknown:
        requeue_of_unknown_outcome(resizer, tmp_path)
    else:
        step(resizer, snap(job()), NOW, GROW)
        checkpointed(tmp_path, NOW + 10)
        actions, _, _ = resizer.plan(snap(job()), Plan(), NOW + 60)
        assert actions == [RequeueHold(7)]  # enacted, and never recorded
    assert step(resizer, snap(job(stopping)), NOW + 65) == ([], {7})  # waits, keeps the job
    assert phase(resizer) == SIGNALLED
    assert released_eventually(resizer, NOW + 65), resizer.store.resizes()[7]
    assert phase(resizer) == DONE


def test_a_signalled_job_stuck_stopping_in_a_flag_is_abandoned_after_the_timeout_saying_so(
        resizer, tmp_path) -> None:
    step(resizer, snap(job()), NOW, GROW)
    checkpointed(tmp_path, NOW + 200)
    resizer.plan(snap(job()), Plan(), NOW + 240)  # RequeueHold enacted, never recorded
    other = snap(job(JobState.OTHER))
    # timed from the checkpoint, not the signal: a requeue sent late is waited for all the same
    assert step(resizer, other, NOW + 480) == ([], {7}) and phase(resizer) == SIGNALLED
    assert step(resizer, other, NOW + 501) == ([], set()) and phase(resizer) == ABANDONED
    note = resizer.store.resizes()[7]["note"]
    assert "still OTHER" in note and "scontrol release 7" in note
    # a job still completing is waited for: Slurm ends that by itself
    resizer.store.record_resize(7, SIGNALLED, NOW + 600, "test")
    assert step(resizer, snap(job(JobState.COMPLETING)), NOW + 5000) == ([], {7}) and phase(resizer) == SIGNALLED


@pytest.mark.parametrize("end", [JobState.COMPLETED, JobState.CANCELLED, JobState.FAILED, None])
def test_a_signalled_job_that_ends_while_stopping_is_abandoned_at_once(resizer, tmp_path, end) -> None:
    step(resizer, snap(job()), NOW, GROW)
    checkpointed(tmp_path, NOW + 10)
    assert step(resizer, snap(job(JobState.COMPLETING)), NOW + 60) == ([], {7})
    assert step(resizer, snap(job(end)) if end else snap(), NOW + 120) == ([], set())
    assert phase(resizer) == ABANDONED


def test_a_job_an_administrator_requeued_and_held_before_its_checkpoint_is_not_released(resizer) -> None:
    """Waiting while it stops changes nothing for a hold that is not the resize's."""
    step(resizer, snap(job()), NOW, GROW)
    assert step(resizer, snap(job(JobState.COMPLETING)), NOW + 60) == ([], {7})
    assert step(resizer, snap(job(JobState.OTHER)), NOW + 90) == ([], {7})
    assert step(resizer, snap(job(JobState.PENDING, held=True)), NOW + 120) == ([], set())
    assert phase(resizer) == ABANDONED
    assert not released_eventually(resizer, NOW + 120)


def test_a_requeued_job_seen_in_a_flag_alone_is_waited_for_then_released(resizer, tmp_path) -> None:
    """After a recorded requeue, the REQUEUED flag alone (OTHER) is a job still stopping too."""
    step(resizer, snap(job()), NOW, GROW)
    checkpointed(tmp_path, NOW + 10)
    step(resizer, snap(job()), NOW + 60)
    assert phase(resizer) == REQUEUED
    assert step(resizer, snap(job(JobState.OTHER)), NOW + 120) == ([], {7}) and phase(resizer) == REQUEUED
    assert step(resizer, snap(job(JobState.PENDING, held=True)), NOW + 180)[0] == [SetGpus(7, 2, 1), Release(7)]
    assert phase(resizer) == DONE
    # one stuck in it past the timeout is given up, saying so
    resizer.store.record_resize(7, REQUEUED, NOW + 1000, "test")
    assert step(resizer, snap(job(JobState.OTHER)), NOW + 1300) == ([], {7})
    assert step(resizer, snap(job(JobState.OTHER)), NOW + 1301) == ([], set()) and phase(resizer) == ABANDONED
    assert "scontrol release 7" in resizer.store.resizes()[7]["note"]


def test_only_elastic_running_jobs_within_the_users_range_are_signalled(resizer) -> None:
    assert step(resizer, snap(job(elastic=False)), NOW, GROW) == ([], set())
    assert step(resizer, snap(job(high=1)), NOW, GROW) == ([], set())                # beyond gpus=1-1
    assert step(resizer, snap(job(JobState.PENDING)), NOW, GROW) == ([], set())     # the planner's
    assert step(resizer, snap(job(gpus=2)), NOW, GROW) == ([], set())               # already that size
    assert resizer.store.resizes() == {}


def test_a_job_that_ends_before_its_checkpoint_is_not_requeued(resizer) -> None:
    step(resizer, snap(job()), NOW, GROW)
    assert step(resizer, snap(job(JobState.COMPLETED)), NOW + 60) == ([], set())
    assert phase(resizer) == ABANDONED


def test_at_most_one_shrink_is_in_flight(resizer: Resizer, tmp_path) -> None:
    """Two jobs asked to shrink for the same queued job: one is; the other waits until the
    first is done (a grow is not held back)."""
    seven, eight = job(gpus=4), replace(job(gpus=4), job_id=8)
    both = Plan(decisions=(JobDecision(7, gpus_per_node=3, num_nodes=1), JobDecision(8, gpus_per_node=3, num_nodes=1)))
    actions, _ = step(resizer, snap(seven, eight), NOW, both)
    assert actions == [SignalJob(7)]
    grow_nine = Plan(decisions=(JobDecision(8, gpus_per_node=3, num_nodes=1), JobDecision(9, gpus_per_node=2)))
    nine = replace(job(gpus=1), job_id=9)
    actions, _ = step(resizer, snap(seven, eight, nine), NOW + 60, grow_nine)
    assert actions == [SignalJob(9)]                               # 7's shrink in flight: 8 waits
    checkpointed(tmp_path, NOW + 120)
    assert step(resizer, snap(seven, eight), NOW + 180)[0] == [RequeueHold(7)]
    pending = replace(seven, state=JobState.PENDING, held=True)
    assert step(resizer, snap(pending, eight), NOW + 240, both)[0] == [SetGpus(7, 3, 1), Release(7)]
    assert step(resizer, snap(replace(seven, gpus_per_node=3), eight), NOW + 300, both)[0] == [SignalJob(8)]


def test_a_shrink_raises_the_time_limit_by_the_gpus_it_gives_up_and_a_grow_keeps_it(resizer, tmp_path) -> None:
    """4 -> 3 GPUs: the rest of the work may take 4/3 as long as all of it did, so the limit as
    submitted (the marker's 60 minutes) becomes 80, before the release; a retried step asks for
    no more (anchored on the submitted limit, not the raised one); MaxTime bounds it."""
    marker = format_marker(GreenOptions(gpus_min=1, gpus_max=4, elastic=True, time_limit_s=3600.0))
    big = job(gpus=4, admin_comment=marker, time_limit_s=3600.0, partition="gpu")
    shrink = Plan(decisions=(JobDecision(7, gpus_per_node=3, num_nodes=1),))
    step(resizer, snap(big), NOW, shrink)
    checkpointed(tmp_path, NOW + 10)
    step(resizer, snap(big), NOW + 60)
    held = replace(big, state=JobState.PENDING, held=True)
    actions, _ = step(resizer, snap(held), NOW + 120, fail={SetGpus, Release})
    assert actions == [SetGpus(7, 3, 1), SetTimeLimit(7, 4800.0), Release(7)]
    # the count was refused and the release too: the retry asks for the same limit (its own
    # raise went through), or none if it already holds
    assert step(resizer, snap(replace(held, time_limit_s=4800.0)), NOW + 180)[0] == [SetGpus(7, 3, 1), Release(7)]
    # a partition's MaxTime bounds the raise; a job without any limit gets none
    resizer.store.record_resize(7, REQUEUED, NOW + 200, "test")
    bounded = ClusterSnapshot(taken_at=NOW, jobs=(held,), partitions=(Partition("gpu", max_time_s=4200.0),))
    assert step(resizer, bounded, NOW + 240)[0] == [SetGpus(7, 3, 1), SetTimeLimit(7, 4200.0), Release(7)]
    resizer.store.record_resize(7, REQUEUED, NOW + 300, "test")
    unlimited = replace(held, admin_comment=format_marker(GreenOptions(gpus_min=1, gpus_max=4, elastic=True)),
                        time_limit_s=None)
    assert step(resizer, snap(unlimited), NOW + 360)[0] == [SetGpus(7, 3, 1), Release(7)]


@pytest.mark.parametrize(("max_time_s", "started"), [(None, True), (4800.0, True), (4740.0, False)])
def test_a_shrink_whose_limit_would_pass_the_partition_max_time_is_not_started(resizer, max_time_s, started) -> None:
    """4 -> 3 GPUs needs 80 minutes from the submitted 60: with MaxTime 79 minutes the requeued
    job could not get them (over MaxTime it would not start), so it keeps running as it is."""
    marker = format_marker(GreenOptions(gpus_min=1, gpus_max=4, elastic=True, time_limit_s=3600.0))
    big = job(gpus=4, admin_comment=marker, time_limit_s=3600.0, partition="gpu")
    bounded = ClusterSnapshot(taken_at=NOW, jobs=(big,), partitions=(Partition("gpu", max_time_s=max_time_s),))
    actions, owned, notes = resizer.plan(bounded, Plan(decisions=(JobDecision(7, gpus_per_node=3, num_nodes=1),)), NOW)
    assert (actions == [SignalJob(7)]) is started and (7 in owned) is started
    assert any("MaxTime" in note for note in notes) is not started


def test_a_job_without_a_submitted_limit_is_scaled_from_its_partitions_default(resizer, tmp_path) -> None:
    """No --time: Slurm gave it the partition's DefaultTime (30 min); halved, it gets an hour."""
    two = job(gpus=2, time_limit_s=1800.0, partition="gpu")
    step(resizer, snap(two), NOW, Plan(decisions=(JobDecision(7, gpus_per_node=1, num_nodes=1),)))
    checkpointed(tmp_path, NOW + 10)
    step(resizer, snap(two), NOW + 60)
    held = ClusterSnapshot(taken_at=NOW, jobs=(replace(two, state=JobState.PENDING, held=True),),
                           partitions=(Partition("gpu", default_time_s=1800.0, max_time_s=86400.0),))
    assert step(resizer, held, NOW + 120)[0] == [SetGpus(7, 1, 1), SetTimeLimit(7, 3600.0), Release(7)]


def test_reading_the_reports_sweeps_those_of_jobs_that_ended(resizer: Resizer, tmp_path) -> None:
    gone = write(tmp_path, JobProgress(3, "samples", 100.0, 10.0, 0.0, NOW - 7200, total=1000.0))
    os.utime(gone, (NOW - 7200, NOW - 7200))
    write(tmp_path, JobProgress(7, "samples", 100.0, 10.0, 0.0, NOW, total=1000.0))
    assert list(resizer.reports(snap(job()), NOW)) == [7]
    assert not gone.exists() and (tmp_path / "7.progress.json").exists()


def test_the_running_elastic_jobs_reports_reach_the_policys_context(resizer: Resizer, tmp_path) -> None:
    """Only running jobs that opted in are read (each a file of its own user), and the
    controller hands them to the policy; a report of a job not asked about is not."""
    for job_id in (7, 8, 9):
        write(tmp_path, JobProgress(job_id, "samples", 100.0, 10.0, 0.0, NOW, total=1000.0))
    plain, queued = replace(job(elastic=False), job_id=8), replace(job(state=JobState.PENDING), job_id=9)
    reports = resizer.reports(snap(job(), plain, queued), NOW)
    assert list(reports) == [7] and reports[7].time_left_s(NOW) == 90.0

    seen = []

    class Recording:
        name = "recording"

        def __call__(self, context) -> Plan:
            seen.append(dict(context.progress))
            return Plan()

    class Backend:
        def snapshot(self) -> ClusterSnapshot:
            return snap(job(), plain, queued)

        def apply(self, actions):
            return [ActionResult(a) for a in actions]

    controller = Controller(backend=Backend(), policy=Recording(), carbon=None, models=None, store=resizer.store,
                            resizer=resizer)
    controller.tick(NOW)
    assert list(seen[0]) == [7]
    controller.resizer = None
    controller.tick(NOW + 60)
    assert seen[1] == {}


def test_settled_reports_are_kept_as_the_jobs_rate_at_its_gpu_count(resizer: Resizer, tmp_path) -> None:
    """A report counts once the job ran ``settle_s`` at its size, never of a job being
    checkpointed (the checkpoint slows it) or spanning nodes; the policy gets the rates."""
    write(tmp_path, JobProgress(7, "samples", 100.0, 10.0, 0.0, NOW))
    fresh = job(start_time=NOW - 100)  # warming up at its new size
    resizer.reports(snap(fresh), NOW)
    step(resizer, snap(fresh), NOW)
    assert resizer.measured(snap(fresh)) == {}
    settled = job(gpus=2, start_time=NOW - 600)
    resizer.reports(snap(settled), NOW)
    step(resizer, snap(settled), NOW)
    assert resizer.measured(snap(settled)) == {7: (MeasuredRate(2, "samples", 0.0, 10.0, 1),)}
    assert resizer.measured(snap(replace(settled, admin_comment=""))) == {}  # not elastic: not the policy's

    write(tmp_path, JobProgress(7, "samples", 100.0, 30.0, 0.0, NOW + 60))
    spanning = job(gpus=1, num_nodes=2, nodes=("node1", "node2"), start_time=NOW - 600)
    resizer.reports(snap(spanning), NOW + 60)
    step(resizer, snap(spanning), NOW + 60)
    assert resizer.measured(snap(settled)) == {7: (MeasuredRate(2, "samples", 0.0, 10.0, 1),)}
    resizer.reports(snap(settled), NOW + 60)
    step(resizer, snap(settled), NOW + 60, Plan(decisions=(JobDecision(7, gpus_per_node=3, num_nodes=1),)))
    write(tmp_path, JobProgress(7, "samples", 100.0, 1.0, 0.0, NOW + 120))
    resizer.reports(snap(settled), NOW + 120)
    step(resizer, snap(settled), NOW + 120)
    assert phase(resizer) == SIGNALLED
    assert resizer.measured(snap(settled)) == {7: (MeasuredRate(2, "samples", 0.0, 20.0, 2),)}


def test_without_learn_scaling_no_rate_is_kept(tmp_path) -> None:
    resizer = Resizer(StateStore(tmp_path / "state.db"), ProgressReader(tmp_path, uid=lambda user: os.getuid()),
                      ResizeSettings(learn_scaling=False))
    write(tmp_path, JobProgress(7, "samples", 100.0, 10.0, 0.0, NOW))
    settled = job(start_time=NOW - 600)
    resizer.reports(snap(settled), NOW)
    step(resizer, snap(settled), NOW)
    assert resizer.measured(snap(settled)) == {} and resizer.store.rates([7]) == {}
