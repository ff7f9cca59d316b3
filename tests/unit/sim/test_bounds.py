"""Both carbon bounds against what every policy really emits in the simulator, and the jobs they see."""

import numpy as np
import pandas as pd
import pytest

from sim_literals import HOUR, T0, workload
from slurm_green.carbon.signal import CarbonSignal
from slurm_green.models.registry import default_registry
from slurm_green.policy.lower_bound import carbon_lower_bound
from slurm_green.policy.lp_bound import lp_lower_bound
from slurm_green.policy.registry import POLICY_NAMES, PolicyKnobs, make_policy
from slurm_green.sim.bounds import bound_inputs
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.runner import simulate


def daily_signal(days: int = 6) -> CarbonSignal:
    """A solar-like day (clean noon, dirty night) with day-to-day noise."""
    hours = np.arange(days * 24)
    values = 300 - 200 * np.clip(np.sin((hours % 24 - 6) / 12 * np.pi), 0, None)
    values = values + np.random.default_rng(3).integers(0, 60, size=len(hours))
    index = pd.date_range(pd.Timestamp(T0 - 2 * HOUR, unit="s", tz="UTC"), periods=len(hours), freq="h")
    return CarbonSignal.from_series(pd.Series(values.astype(float), index=index))


# Eight jobs on 2 x 4 GPUs, some of them larger than half the cluster: GPU-hours of work at the default model.
JOBS = [(0.0, 4, 6 * HOUR), (600.0, 2, 3 * HOUR), (1200.0, 8, 10 * HOUR), (3 * HOUR, 1, 5 * HOUR),
        (4 * HOUR, 4, 8 * HOUR), (5 * HOUR, 2, 2 * HOUR), (9 * HOUR, 8, 4 * HOUR), (10 * HOUR, 1, 1 * HOUR)]


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_no_policy_emits_less_than_either_bound(name):
    models, forecast, spec = default_registry(), daily_signal(), ClusterSpec(nodes=2, gpus_per_node=4)
    wl = workload(*JOBS)
    options = TraceOptions(flex_s=12 * HOUR)
    jobs, shape = bound_inputs(wl, spec, models, options)
    blind = carbon_lower_bound(jobs, forecast, models, shape)
    lp = lp_lower_bound(jobs, forecast, models, shape)
    run = simulate(wl, spec, make_policy(PolicyKnobs(name=name)), forecast, models, "daily", options,
                   min_tick_s=300.0, max_tick_s=900.0)
    assert run.summary["finished"] == len(JOBS)
    assert run.summary["carbon_kg"] >= blind.carbon_kg * (1 - 1e-9)
    assert run.summary["carbon_kg"] >= lp.carbon_kg * (1 - 1e-9)


def test_the_bounds_see_each_job_as_the_simulator_submits_it():
    spec = ClusterSpec.mixed(4, 4, ("h100", "a40"))
    wl = workload((0.0, 6, 1000.0), (10.0, 1, 1000.0))
    jobs, shape = bound_inputs(wl, spec, default_registry(), TraceOptions(gpu_range=2.0))
    # 6 GPUs on 4-GPU nodes go as 4 x 2; the range is around what was submitted (capped at the cluster).
    assert (jobs.per_node[0], jobs.nodes[0], jobs.gpus_min[0], jobs.gpus_max[0]) == (4, 2, 4, 16)
    assert set(jobs.gpu_type) <= {"h100", "a40"} and shape.nodes == {"h100": 2, "a40": 2}
    fixed, _ = bound_inputs(wl, ClusterSpec(nodes=2, gpus_per_node=4), default_registry(), TraceOptions(managed=False))
    assert fixed.gpu_type == (None, None) and list(fixed.gpus_min) == list(fixed.gpus_max) == [8, 1]
    assert not fixed.accept_cap
