"""Layer freezing in the simulator: a freezing job's blocks freeze at the steps of
``TraceOptions.freeze_steps`` and it then runs at the freezing model's effective rate."""

from __future__ import annotations

import pytest
from sim_literals import HOUR, T0, LinearModels, flat_signal, workload

from slurm_green.core.actions import RequeueHold, SignalJob
from slurm_green.models.freezing import DEFAULT_PENALTY, FITTED, default_params
from slurm_green.policy.baselines import FifoPolicy
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import Simulator, TraceOptions
from slurm_green.sim.runner import simulate

KEY = b"0123456789abcdef-sim-freeze-key!"
NODE = ClusterSpec(nodes=1, gpus_per_node=4, idle_w_per_gpu=0.0)
WORK = 4 * HOUR
FREEZING = TraceOptions(flex_s=0.0, accept_freeze=1.0)
#: The literal model's type has no freezing sweep: it gets the least-gaining fit.
SKIP = default_params(FITTED).skip


def _rate(frozen: float) -> float:
    """One GPU's effective rate at ``frozen``, from the formula, not the code under test."""
    return (1 - DEFAULT_PENALTY * frozen) / (1 - SKIP * frozen)


def test_a_freezing_job_speeds_up_at_each_step_and_its_energy_follows_its_time():
    result = simulate(workload((0.0, 1, WORK)), NODE, FifoPolicy(), flat_signal(), LinearModels(), options=FREEZING)
    # A quarter of the work at rate 1, a quarter with a quarter frozen, the rest with half.
    runtime = WORK / 4 + (WORK / 4) / _rate(0.25) + (WORK / 2) / _rate(0.5)
    assert _rate(0.5) > _rate(0.25) > 1
    assert result.record.end[0] == pytest.approx(T0 + runtime)
    # The literal type draws no less power frozen (no power drop without a sweep): 100 W throughout.
    assert result.summary["energy_kwh"] == pytest.approx(100.0 * runtime / 3.6e6)
    plain = simulate(workload((0.0, 1, WORK)), NODE, FifoPolicy(), flat_signal(), LinearModels(),
                     options=TraceOptions(flex_s=0.0))
    assert plain.record.end[0] == T0 + WORK


def test_the_helper_reports_the_frozen_share_and_its_rate_in_samples():
    """As the real helper counts: samples per second, faster frozen (not the penalised
    statistical progress the simulator runs on), with a time left that is exact all the same."""
    sim = Simulator(workload((0.0, 1, WORK)), NODE, LinearModels(), flat_signal(), KEY, FREEZING)
    sim._arrive(0)
    sim._schedule(T0)
    assert sim.progress_of(1, T0).frozen == 0.0
    step = T0 + WORK / 4
    sim.clock.set(step)
    sim._freeze(1, step)
    report = sim.progress_of(1, step + 100.0)
    samples = 1 / (1 - DEFAULT_PENALTY * 0.25)  # samples per unit of statistical progress
    assert report.frozen == 0.25 and report.per_s == pytest.approx(1 / (1 - SKIP * 0.25))
    assert report.done == pytest.approx((WORK / 4 + 100.0 * _rate(0.25)) * samples)
    assert report.time_left_s(step + 100.0) == pytest.approx((WORK * 3 / 4 - 100.0 * _rate(0.25)) / _rate(0.25))
    assert sim._running[1].next_freeze == pytest.approx(step + (WORK / 4) / _rate(0.25))


def test_a_requeued_frozen_job_restarts_frozen_at_its_new_size():
    options = TraceOptions(flex_s=0.0, accept_freeze=1.0, accept_requeue=1.0, gpu_range=4.0)
    sim = Simulator(workload((0.0, 1, WORK)), NODE, LinearModels(), flat_signal(), KEY, options)
    sim._arrive(0)
    sim._schedule(T0)
    at = T0 + 0.6 * WORK  # past both steps at rate 1 would be 0.6 of the work; it ran faster
    sim.clock.set(at)
    sim._freeze(1, at)
    sim._freeze(1, at)
    assert sim._running[1].frozen == 0.5 and sim._freeze_left(0, sim._running[1].freeze_step) is None
    assert sim.apply([SignalJob(1)])[0].ok
    sim.clock.set(at + 120.0)
    assert sim.apply([RequeueHold(1)])[0].ok
    left = sim._restart_work[1]
    assert sim._freezing(0, left) == (0.5, len(options.freeze_steps))  # frozen, no step ahead


def test_only_jobs_that_opted_in_freeze():
    options = TraceOptions(flex_s=0.0, accept_freeze=0.5, share_seed=3)
    sim = Simulator(workload(*[(0.0, 1, WORK)] * 40), ClusterSpec(nodes=10, gpus_per_node=4), LinearModels(),
                    flat_signal(), KEY, options)
    for i in range(40):
        sim._arrive(i)
    sim._schedule(T0)
    planned = {job_id for _, job_id in sim._freeze_steps}
    assert planned == {i + 1 for i in range(40) if sim.freezes[i]} and 5 < len(planned) < 35
    plain = next(i + 1 for i in range(40) if not sim.freezes[i])
    assert sim.progress_of(plain, T0) is None  # no helper: no report
