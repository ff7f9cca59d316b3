"""Checkpoint-and-requeue in the simulator: the controller's resizer grows a running elastic
job through the simulated training helper and Slurm's requeue, and the record keeps each
run's energy and carbon."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_literals import HOUR, T0, LinearModels, flat_signal, workload
from test_engine_sharing import GUEST_SLOW, HOST_SLOW, PAIR_W, PairModels, stepped_signal

from slurm_green.controller.resize import ResizeSettings
from slurm_green.core.actions import ActionError, Release, RequeueHold, SetGpus, ShareGpus, SignalJob
from slurm_green.core.cluster import JobState
from slurm_green.core.green_options import parse_marker
from slurm_green.core.models import Config
from slurm_green.models.freezing import effective_rate
from slurm_green.policy.baselines import FifoPolicy
from slurm_green.policy.running import GrowRunning, ShrinkRunning, resizing
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import Simulator, TraceOptions
from slurm_green.sim.runner import simulate

KEY = b"0123456789abcdef-sim-requeue-key"
NODE = ClusterSpec(nodes=1, gpus_per_node=4, idle_w_per_gpu=0.0)
WORK = 4 * HOUR  # GPU-seconds: 4 h on the one GPU it asks for
#: Every job elastic, allowed up to 4 GPUs, not deferred.
ELASTIC = TraceOptions(flex_s=0.0, gpu_range=4.0, accept_requeue=1.0)


def _running_sim(options: TraceOptions = ELASTIC) -> Simulator:
    """One 1-GPU job, started at T0."""
    sim = Simulator(workload((0.0, 1, WORK)), NODE, LinearModels(), flat_signal(), KEY, options)
    sim._arrive(0)
    sim._schedule(T0)
    assert sim.snapshot().jobs[0].state is JobState.RUNNING
    return sim


def test_the_controller_grows_an_idle_nodes_elastic_job_through_checkpoint_and_requeue():
    """FIFO wrapped in GrowRunning, ticks at most every 300 s and at least every 900 s while
    the job runs: signalled at the 900 s tick, checkpoint 60 s later, requeued at the next
    tick (1200 s), held for Slurm's 120 s, released at 4 GPUs at the tick after (1500 s),
    and it restarts from its checkpoint plus 60 s of reload at 4 times the rate."""
    ticks = (900.0, 1200.0, 1500.0)
    result = simulate(workload((0.0, 1, WORK)), NODE, GrowRunning(FifoPolicy()), flat_signal(100.0), LinearModels(),
                      options=ELASTIC, resize=ResizeSettings(min_interval_s=0.0))
    record = result.record
    signalled, requeued, restarted = (T0 + t for t in ticks)
    left = WORK - (signalled + ELASTIC.checkpoint_s - T0)  # work after the checkpoint is done again
    end = restarted + (left + ELASTIC.restore_s * 1) / 4
    assert record.restarts[0] == 1 and record.gpus[0] == 4
    assert record.first_start[0] == T0 and record.start[0] == restarted
    assert record.end[0] == pytest.approx(end)
    first_run_j, second_run_j = 100.0 * (requeued - T0), 400.0 * (end - restarted)
    assert record.earlier_energy_j[0] == pytest.approx(first_run_j)
    summary = result.summary
    assert summary["energy_kwh"] == pytest.approx((first_run_j + second_run_j) / 3.6e6)
    assert summary["carbon_kg"] == pytest.approx(summary["energy_kwh"] * 100.0 / 1000.0)
    assert summary["avg_wait_s"] == 0.0 and summary["avg_jct_s"] == pytest.approx(end - T0)
    assert end - T0 < WORK / 2  # against 4 h at its size


def test_without_a_resizer_or_elastic_jobs_nothing_restarts():
    for options, resize in ((ELASTIC, None), (TraceOptions(flex_s=0.0, gpu_range=4.0), ResizeSettings())):
        result = simulate(workload((0.0, 1, WORK)), NODE, GrowRunning(FifoPolicy()), flat_signal(), LinearModels(),
                          options=options, resize=resize)
        assert result.summary["restarts"] == 0 and result.record.end[0] == T0 + WORK


def test_only_jobs_that_opted_in_run_the_helper_and_only_running_jobs_are_signalled():
    options = TraceOptions(flex_s=0.0, accept_requeue=0.5, share_seed=3)
    sim = Simulator(workload(*[(0.0, 1, WORK)] * 40), ClusterSpec(nodes=10, gpus_per_node=4), LinearModels(),
                    flat_signal(), KEY, options)
    for i in range(40):
        sim._arrive(i)
    marked = [bool(parse_marker(job.admin_comment).elastic) for job in sim.snapshot().jobs]
    assert marked == sim.elastic.tolist() and 5 < sum(marked) < 35
    [pending] = sim.apply([SignalJob(1)])
    assert pending.error is ActionError.INVALID and "not running" in pending.message
    sim._schedule(T0)
    plain = next(i + 1 for i, e in enumerate(marked) if not e)
    [refused] = sim.apply([SignalJob(plain)])
    assert refused.error is ActionError.INVALID and "no training helper" in refused.message
    [usr1] = sim.apply([SignalJob(marked.index(True) + 1, signal="USR1")])
    assert usr1.error is ActionError.INVALID


def test_a_requeue_without_a_new_checkpoint_restarts_from_the_last_one():
    sim = _running_sim()
    sim.clock.set(T0 + 1000.0)
    [ok] = sim.apply([SignalJob(1)])
    assert ok.ok and sim.progress_of(1, T0 + 1000.0).checkpoint == 0.0  # not written yet
    [requeued] = sim.apply([RequeueHold(1)])  # before the checkpoint is whole
    assert requeued.ok
    job = sim.snapshot().jobs[0]
    assert job.state is JobState.PENDING and job.held and job.eligible_time == T0 + 1000.0 + ELASTIC.restart_delay_s
    assert sim.free_count[0] == 4 and sim.progress_of(1, T0 + 1000.0) is None
    assert sim._restart_work[1] == WORK + ELASTIC.restore_s  # all 1000 s of work lost
    assert sim.record.earlier_energy_j[0] == pytest.approx(100.0 * 1000.0)
    assert math.isnan(sim.record.end[0]) and math.isnan(sim.record.start[0])


def test_the_helper_reports_the_checkpoint_once_it_is_whole():
    sim = _running_sim()
    sim.clock.set(T0 + 500.0)
    sim.apply([SignalJob(1)])
    assert sim.progress_of(1, T0 + 559.0).checkpoint == 0.0
    report = sim.progress_of(1, T0 + 600.0)
    assert report.checkpoint == T0 + 560.0 and report.done == pytest.approx(600.0) and report.per_s == 1.0
    assert report.total == WORK and report.time_left_s(T0 + 600.0) == pytest.approx(WORK - 600.0)
    sim.clock.set(T0 + 700.0)
    sim.apply([RequeueHold(1)])
    assert sim._restart_work[1] == pytest.approx(WORK - 560.0 + ELASTIC.restore_s)


def test_a_running_elastic_job_shrinks_so_the_blocked_job_behind_it_starts():
    """Job 1 holds the node's 4 GPUs for 10 h; job 2 (1 GPU) arrives an hour in. Shrinking job 1
    to 3 GPUs is signalled at that tick, requeued at the next (3900 s) where job 2 starts on
    the freed GPU, and job 1 restarts on the other 3 at the tick after (4200 s)."""
    jobs = workload((0.0, 4, 4 * 10 * HOUR), (HOUR, 1, 1800.0))
    options = TraceOptions(flex_s=0.0, gpu_range=4.0, accept_requeue=1.0)  # job 1 may run on 1-4 GPUs
    result = simulate(jobs, NODE, ShrinkRunning(FifoPolicy()), flat_signal(), LinearModels(), options=options,
                      resize=ResizeSettings(min_interval_s=0.0))
    record = result.record
    assert record.start[1] == T0 + 3900.0 and record.end[1] == T0 + 3900.0 + 1800.0
    assert record.restarts.tolist() == [1, 0] and record.gpus[0] == 3 and record.start[0] == T0 + 4200.0
    left = 4 * 10 * HOUR - 4 * (HOUR + ELASTIC.checkpoint_s)  # work after job 1's checkpoint at 3660 s
    assert record.end[0] == pytest.approx(T0 + 4200.0 + (left + ELASTIC.restore_s * 4) / 3)
    plain = simulate(jobs, NODE, FifoPolicy(), flat_signal(), LinearModels(), options=options)
    assert plain.record.start[1] == T0 + 10 * HOUR  # job 2 waited for job 1's end


def test_a_requeued_job_restarting_on_a_partners_gpu_resumes_from_its_checkpoint():
    """Restarted as a guest (``ShareGpus`` while held), a job does the work left at its
    checkpoint plus the reload, at the pair's rate, not all its work again."""
    options = TraceOptions(managed=False, accept_requeue=1.0, accept_share=1.0)
    sim = Simulator(workload((0.0, 1, 10 * HOUR), (0.0, 1, 2 * HOUR)), NODE, PairModels(), flat_signal(), KEY, options)
    sim._arrive(0)
    sim._arrive(1)
    sim._schedule(T0)
    sim.clock.set(T0 + HOUR)
    sim.apply([SignalJob(2)])
    sim.clock.set(T0 + HOUR + 60.0)  # the checkpoint is whole
    assert sim.apply([RequeueHold(2)])[0].ok
    restart = T0 + HOUR + 60.0 + options.restart_delay_s
    sim.clock.set(restart)
    assert all(r.ok for r in sim.apply([ShareGpus(2, 1), Release(2)]))
    sim._schedule(restart)
    assert sim._running[2].partner == 1 and sim._running[1].partner == 2  # restarted as a guest
    left = 2 * HOUR - (HOUR + 60.0) + options.restore_s
    assert sim.record.end[1] == pytest.approx(restart + left * GUEST_SLOW)
    assert not sim._restart_work  # taken by the restart


class ShareThenRequeue:
    """Binds job 2 to job 1 at the first tick, requeues job 2 at ``requeue_at``, then releases it:
    a former guest, it comes back on the whole GPU it asked for (the simulator models shards
    only as a binding to a partner; released on 0 GPUs and a shard, its start divided by zero)."""

    def __init__(self, sim: Simulator, requeue_at: float) -> None:
        self.sim, self.requeue_at, self.stopped_at, self.results = sim, requeue_at, math.nan, []

    def tick(self, now: float) -> None:
        if not self.results:
            self.results += self.sim.apply([ShareGpus(2, 1)])
        elif math.isnan(self.stopped_at) and now >= self.requeue_at:
            self.results += self.sim.apply([RequeueHold(2)])
            self.stopped_at = now
        elif not math.isnan(self.stopped_at) and self.sim.snapshot().jobs[-1].held:
            self.results += self.sim.apply([Release(2)])


def test_a_stopped_run_whose_power_changed_is_charged_each_stretch_at_the_intensity_then():
    """Job 2 runs as job 1's guest (its share of the pair's power) in a clean stretch, then alone
    (its solo 100 W), into a dirty one, and is requeued: its stopped run's carbon is each
    stretch's energy times the intensity then."""
    options = TraceOptions(managed=False, accept_requeue=1.0, accept_share=1.0)
    signal = stepped_signal(2)
    sim = Simulator(workload((0.0, 1, HOUR), (0.0, 1, 10 * HOUR)), NODE, PairModels(), signal, KEY, options)
    script = ShareThenRequeue(sim, T0 + 3 * HOUR)
    record = sim.run(script, min_tick_s=60.0, max_tick_s=300.0, tick_while_running=True)
    assert all(r.ok for r in script.results) and len(script.results) == 3 and record.restarts[1] == 1
    assert record.gpus[1] == 1 and record.end[1] > script.stopped_at  # restarted alone, on its whole GPU
    host_end_h = HOUR * HOST_SLOW / HOUR  # job 1's hour of work at its pair rate
    stopped_h = (script.stopped_at - T0) / HOUR
    expected_g = (PAIR_W / 2 * host_end_h * 100 + 100 * (2 - host_end_h) * 100 + 100 * (stopped_h - 2) * 500) / 1000
    assert record.earlier_energy_j[1] == pytest.approx((PAIR_W / 2 * host_end_h + 100 * (stopped_h - host_end_h))
                                                       * HOUR)
    assert record.earlier_carbon_g[1] == pytest.approx(expected_g)
    assert record.summary(sim.workload.submit)["carbon_kg"] == pytest.approx(
        record.jobs_carbon_kg(signal, T0, record.ended_at + 1.0))


class Scripted:
    """A controller that, at its n-th tick, sends the n-th step of a script for job 1 (then
    releases it if it is held, so the run can end); remembers what each action returned."""

    def __init__(self, sim: Simulator, script: list[str]) -> None:
        self.sim, self.script, self.results = sim, list(script), []

    def tick(self, now: float) -> None:
        step = self.script.pop(0) if self.script else "release"
        action = {"signal": SignalJob(1), "requeue": RequeueHold(1), "grow": SetGpus(1, 4),
                  "shrink": SetGpus(1, 1), "release": Release(1)}.get(step)
        if action is not None:
            self.results.extend(self.sim.apply([action]))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["signal", "requeue", "grow", "shrink", "release", "nothing"]), max_size=12),
       st.booleans())
def test_any_sequence_of_signals_requeues_and_resizes_loses_no_job_and_no_gpu(script, freezing):
    """Whatever a controller sends, in whatever order, to jobs that freeze layers or not: the
    job ends, every GPU comes back, each accepted requeue is one restart, and the energy
    drawn is at least its work's."""
    options = replace(ELASTIC, accept_freeze=1.0 if freezing else 0.0)
    sim = Simulator(workload((0.0, 2, 2 * 3 * HOUR), (600.0, 1, 1800.0)), NODE, LinearModels(), flat_signal(), KEY,
                    options)
    controller = Scripted(sim, script)
    record = sim.run(controller, min_tick_s=300.0, max_tick_s=900.0, tick_while_running=True)
    requeued = sum(r.ok for r in controller.results if isinstance(r.action, RequeueHold))
    assert np.isfinite(record.end).all() and record.restarts.tolist() == [requeued, 0]
    assert sim.free_count.tolist() == [4] and not sim._running and not sim._jobs
    # the linear model: 100 J per unit of work on any GPU count (less by the fastest frozen
    # rate's factor), so lost work only adds
    one = LinearModels().for_job("linear")  # the literal model: compute is the whole step on any count
    fastest = max(effective_rate(one, Config(1), share) for _, share in options.freeze_steps) if freezing else 1.0
    assert record.earlier_energy_j[0] + record.energy_j[0] >= 100.0 * 2 * 3 * HOUR / fastest - 1e-6
    assert not sim._freeze_steps or all(sim._running.get(j) is None for _, j in sim._freeze_steps)
    assert (record.first_start <= record.start).all()


@dataclass(frozen=True)
class FlatModel:
    """A job that goes no faster on more GPUs than on one (a data loader that cannot keep up)."""

    job_type: str = "linear"

    def throughput(self, config: Config) -> float:
        return config.cap_fraction

    def power_w(self, config: Config) -> float:
        return config.gpus * 100.0 * config.cap_fraction


class FlatModels(LinearModels):
    def for_job(self, job_type: str | None, gpu: str | None = None) -> FlatModel:
        return FlatModel()


def test_a_job_measured_not_to_scale_gives_its_gpus_back_to_the_queue_at_once():
    """The controller believes the job scales linearly; it really goes no faster on 4 GPUs. It
    is grown 1 -> 4 into the idle node anyway (nothing measured yet); its reports at 1 and
    then 4 GPUs say how it scales. When a 3-GPU job arrives (3 h), shrinking it back costs it
    only the restart: it is shrunk at once and the newcomer starts within a tick and the
    requeue. Without the measured rates the shrink looks like 4x the job's time left and
    waits until little is left."""
    jobs = workload((0.0, 1, 6 * HOUR), (3 * HOUR, 3, 3 * 1800.0))
    options = TraceOptions(flex_s=0.0, gpu_range=4.0, accept_requeue=1.0)
    starts = {}
    for learn in (True, False):
        result = simulate(jobs, NODE, resizing(FifoPolicy(), shrink=True), flat_signal(), LinearModels(),
                          options=options, truth=FlatModels(),
                          resize=ResizeSettings(min_interval_s=0.0, learn_scaling=learn))
        assert result.record.restarts[0] == 2 and result.record.gpus[0] == 1  # grown, then shrunk
        starts[learn] = result.record.first_start[1] - T0
    assert starts[True] <= 3 * HOUR + 900.0
    assert starts[False] > 5 * HOUR
