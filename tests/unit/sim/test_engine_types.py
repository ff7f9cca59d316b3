"""A mixed cluster in the simulator: jobs run on nodes of the type they asked for, with that type's models."""

import functools

import numpy as np
import pytest

from sim_literals import T0, flat_signal
from slurm_green.controller.tick import Controller
from slurm_green.core import decision_token
from slurm_green.core.actions import ActionError, SetNodes
from slurm_green.core.models import Config
from slurm_green.models.registry import default_registry
from slurm_green.policy.baselines import FifoPolicy
from slurm_green.sim.carbon import SimCarbonFeed
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import Simulator, TraceOptions
from slurm_green.sim.workload import Workload

KEY = b"0123456789abcdef-sim-test-key"
SPEC = ClusterSpec.mixed(2, 4, ("h100", "a40"))


def _workload(jobs: int) -> Workload:
    return Workload.from_columns("mixed", np.full(jobs, T0), np.ones(jobs, dtype=np.int64), ["resnet50"] * jobs,
                                 duration_s=np.full(jobs, 3600.0))


def _run(jobs: int):
    registry = default_registry()
    sim = Simulator(_workload(jobs), SPEC, registry, flat_signal(), KEY, TraceOptions(flex_s=0.0))
    controller = Controller(sim, FifoPolicy(), SimCarbonFeed(flat_signal(), "flat"), registry,
                            sign=functools.partial(decision_token.sign, KEY),
                            verify=functools.partial(decision_token.verify, KEY))
    return sim, sim.run(controller, min_tick_s=60.0, max_tick_s=600.0), registry


def test_nodes_report_their_type_and_each_job_runs_with_its_nodes_models():
    sim, record, registry = _run(6)
    assert [n.gpu_type for n in sim.snapshot().nodes] == ["h100", "a40"]
    v100 = registry.for_job("resnet50").throughput(Config(1, 1))
    for i, gpu in enumerate(sim.requested_type):
        # the trace's hour at the registry's own type is the job's work; its node's type sets the pace
        expected = 3600.0 * v100 / registry.for_job("resnet50", gpu).throughput(Config(1, 1))
        assert record.end[i] - record.start[i] == pytest.approx(expected)
        assert record.energy_j[i] == pytest.approx(registry.for_job("resnet50", gpu).power_w(Config(1, 1)) * expected)
    assert set(sim.requested_type) == {"h100", "a40"}  # both types ran (the 1st check would fail on a wrong node)


def test_a_job_never_lands_on_or_is_pinned_to_nodes_of_another_type():
    sim = Simulator(_workload(12), SPEC, default_registry(), flat_signal(), KEY, TraceOptions(flex_s=3600.0))
    sim.clock.set(T0)
    sim._arrive(0)
    job = sim.snapshot().jobs[0]
    other = next(n.name for n in sim.snapshot().nodes if n.gpu_type != job.gpu_type)
    [result] = sim.apply([SetNodes(job.job_id, (other,))])
    assert result.error is ActionError.INVALID and job.gpu_type in result.message
    _, record, _ = _run(12)  # 12 one-GPU jobs on 4 + 4 GPUs: at most 4 at once on each type
    assert np.isfinite(record.end).all()


def test_on_one_gpu_type_the_nodes_name_none_and_the_controller_asks_for_the_type_jobs_run_with():
    """Untyped gres, as on a one-type Slurm cluster: the policy's ``running_gpu_type`` is None, so
    it asks the registry's own type, the one the simulator runs the jobs with; naming the spec's
    label (``v100``) instead would have the controller believe V100 models whatever the registry."""
    sim = Simulator(_workload(1), ClusterSpec(nodes=1, gpus_per_node=4), default_registry("p100"), flat_signal(),
                    KEY, TraceOptions(flex_s=0.0))
    assert [n.gpu_type for n in sim.snapshot().nodes] == [None]
    assert sim._runs_on([(0, np.arange(1))]) is None


def test_each_jobs_time_limit_is_its_runtime_on_the_type_it_asked_for_and_fifo_keeps_to_it():
    """Time limit = runtime at full power on the requested type (the only one the job runs on)
    x 1.5, not the runtime on the registry's own type: a K80 job would outrun that, an H100
    job get about 4x its runtime."""
    registry = default_registry()
    spec = ClusterSpec.mixed(2, 1, ("h100", "k80"))
    jobs = 6
    wl = Workload.from_columns("mixed", T0 + 60.0 * np.arange(jobs), np.ones(jobs, dtype=np.int64),
                               ["resnet50"] * jobs, duration_s=np.full(jobs, 3600.0))
    sim = Simulator(wl, spec, registry, flat_signal(), KEY, TraceOptions(managed=False))
    assert set(sim.requested_type) == {"h100", "k80"}
    for i, gpu in enumerate(sim.requested_type):
        runtime = sim.work[i] / registry.for_job("resnet50", gpu).throughput(Config(1, 1, 1.0))
        assert sim.full_runtime[i] == pytest.approx(runtime)
        assert sim.time_limit[i] == pytest.approx(np.ceil(runtime * 1.5 / 60.0) * 60.0)
    controller = Controller(sim, FifoPolicy(), SimCarbonFeed(flat_signal(), "flat"), registry,
                            sign=functools.partial(decision_token.sign, KEY),
                            verify=functools.partial(decision_token.verify, KEY))
    summary = sim.run(controller, min_tick_s=60.0, max_tick_s=600.0).summary(wl.submit)
    assert summary["finished"] == jobs and summary["past_limit"] == 0


def test_a_job_that_asks_for_no_type_runs_on_any_node_with_the_models_of_the_one_it_lands_on():
    """Plain ``gres/gpu`` on a mixed cluster: 8 one-GPU jobs fill both nodes at once, each at its
    node's pace; its time limit covers the slower type."""
    registry = default_registry()
    spec = ClusterSpec.mixed(2, 4, ("h100", "a40"), untyped_share=1.0)
    sim = Simulator(_workload(8), spec, registry, flat_signal(), KEY, TraceOptions(flex_s=0.0))
    controller = Controller(sim, FifoPolicy(), SimCarbonFeed(flat_signal(), "flat"), registry,
                            sign=functools.partial(decision_token.sign, KEY),
                            verify=functools.partial(decision_token.verify, KEY))
    record = sim.run(controller, min_tick_s=60.0, max_tick_s=600.0)
    assert sim.requested_type == [None] * 8 and (record.start == record.start[0]).all()  # all 8 GPUs at once
    v100 = registry.for_job("resnet50").throughput(Config(1, 1))
    took = {gpu: 3600.0 * v100 / registry.for_job("resnet50", gpu).throughput(Config(1, 1)) for gpu in ("h100", "a40")}
    for i in range(8):
        gpu = spec.type_of(record.placed[i][0])
        assert record.end[i] - record.start[i] == pytest.approx(took[gpu])
    assert sorted(spec.type_of(record.placed[i][0]) for i in range(8)) == ["a40"] * 4 + ["h100"] * 4
    assert (sim.time_limit >= max(took.values())).all()
