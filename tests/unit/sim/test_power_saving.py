"""Slurm's power saving in the simulator: nodes idle for SuspendTime draw nothing, and a job
that lands on a suspended node waits for it to resume."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from sim_literals import HOUR, T0, LinearModels, flat_signal, workload

from slurm_green.policy.baselines import FifoPolicy
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.power_saving import PowerSaving
from slurm_green.sim.runner import simulate

TWO = ClusterSpec(nodes=2, gpus_per_node=1, idle_w_per_gpu=30.0)
#: A job of an hour at once, and one three hours later: node 0 idles two hours between them.
JOBS = workload((0.0, 1, HOUR), (3 * HOUR, 1, HOUR))


def run(spec: ClusterSpec):
    return simulate(JOBS, spec, FifoPolicy(), flat_signal(), LinearModels(), options=TraceOptions(flex_s=0.0))


def test_idle_nodes_sleep_after_suspend_time_and_a_job_waits_for_its_node_to_resume():
    plain = run(TWO)
    saving = run(replace(TWO, suspend_after_s=HOUR / 2, resume_s=300.0))
    assert plain.record.end[1] == T0 + 4 * HOUR
    assert saving.record.end[1] == T0 + 4 * HOUR + 300.0  # node 0 slept from 1.5 h: it resumes first
    assert saving.record.end[0] == T0 + HOUR  # the first job found its node awake
    assert (plain.summary["resumes"], saving.summary["resumes"]) == (0, 1)
    # Suspended: node 1 from 0.5 h to the end, node 0 from 1.5 h to 3 h; 30 W each.
    asleep_s = (4 * HOUR + 300.0 - HOUR / 2) + 1.5 * HOUR
    assert saving.summary["suspended_kwh"] == pytest.approx(30.0 * asleep_s / 3.6e6)
    # What the idle GPUs still drew: the half hour before each slept.
    assert saving.summary["idle_energy_kwh"] == pytest.approx(30.0 * HOUR / 3.6e6)
    assert plain.summary["idle_energy_kwh"] == pytest.approx(30.0 * 6 * HOUR / 3.6e6)
    assert plain.summary["suspended_kwh"] == 0.0
    # The resume is counted at the job's power (100 W): more than a booting node draws.
    assert saving.summary["energy_kwh"] - plain.summary["energy_kwh"] == pytest.approx(100.0 * 300.0 / 3.6e6)
    assert saving.summary["total_energy_kwh"] < plain.summary["total_energy_kwh"]


def test_a_node_is_suspended_only_past_suspend_time():
    sleep = PowerSaving.start(2, 0.0, 600.0, 60.0)
    assert sleep is not None and PowerSaving.start(2, 0.0, None, 60.0) is None
    assert not sleep.busy(0, 600.0, 4)  # exactly SuspendTime: still awake
    assert sleep.busy(1, 601.0, 4) and sleep.suspended == [(600.0, 601.0, 4)]
    sleep.idle(0, 1000.0)
    early = PowerSaving.start(1, 1000.0, 600.0, 60.0)
    assert early is not None
    early.close(1500.0, np.array([4]))
    assert early.suspended == []  # idle 500 s only by the end
    sleep.close(2000.0, np.array([4, 4]))
    assert sleep.suspended == [(600.0, 601.0, 4), (1600.0, 2000.0, 4)]  # node 1 is busy
    assert math.isnan(sleep.idle_since[1])


@pytest.mark.parametrize("after, resume", [(-1.0, 60.0), (600.0, math.inf), (math.nan, 0.0)])
def test_a_bad_power_saving_setting_is_refused(after, resume):
    with pytest.raises(ValueError, match="expected finite"):
        PowerSaving.start(1, 0.0, after, resume)
