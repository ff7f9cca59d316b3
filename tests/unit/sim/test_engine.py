import functools
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_literals import HOUR, T0, LinearModels, flat_signal, workload
from slurm_green.controller.tick import Controller
from slurm_green.core import decision_token
from slurm_green.core.actions import ActionError, SetGpus, SetStartTime
from slurm_green.core.cluster import ClusterSnapshot
from slurm_green.core.green_options import parse_marker
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.policy.baselines import FifoPolicy
from slurm_green.sim.carbon import SimCarbonFeed
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import Simulator, TraceOptions
from slurm_green.sim.runner import simulate
from slurm_green.sim.workload import Workload

KEY = b"0123456789abcdef-sim-test-key"
ONE_NODE = ClusterSpec(nodes=1, gpus_per_node=4)


@dataclass
class Scripted:
    """A policy that decides each pending job with ``decide(job)`` and remembers what it saw."""

    decide: object = None
    name: str = "scripted"
    seen: list[ClusterSnapshot] = field(default_factory=list)

    def __call__(self, context):
        self.seen.append(context.snapshot)
        jobs = [j for j in context.snapshot.jobs if j.is_pending]
        return Plan(tuple(self.decide(j, context.now) for j in jobs) if self.decide else ())


def run(wl, policy, spec=ONE_NODE, options=TraceOptions(flex_s=2 * HOUR), sim_key=KEY, signer_key=KEY):
    sim = Simulator(wl, spec, LinearModels(), flat_signal(), sim_key, options)
    controller = Controller(sim, policy, SimCarbonFeed(flat_signal(), "flat"), LinearModels(),
                            sign=functools.partial(decision_token.sign, signer_key),
                            verify=functools.partial(decision_token.verify, signer_key))
    return sim, sim.run(controller, min_tick_s=60.0, max_tick_s=600.0)


def test_idle_gpus_on_nodes_with_nothing_allocated_are_told_apart():
    """What Slurm's power saving would suspend: one 1-GPU job for 2 h on two 4-GPU nodes leaves
    3 idle GPUs awake beside it and a whole idle node."""
    wl = workload((0.0, 1, 2 * HOUR))
    _, record = run(wl, FifoPolicy(), spec=ClusterSpec(nodes=2, gpus_per_node=4, idle_w_per_gpu=30.0))
    summary = record.summary(wl.submit)
    assert summary["idle_energy_kwh"] == pytest.approx(7 * 30.0 * 2 / 1000)
    assert summary["idle_awake_energy_kwh"] == pytest.approx(3 * 30.0 * 2 / 1000)


def test_arrivals_get_the_trusted_marker_and_the_deadline_as_fallback_begin():
    policy = Scripted()  # decides nothing: the job must still start, at its deadline
    _, record = run(workload((0.0, 2, 2 * HOUR)), policy)
    first = policy.seen[0].jobs[0]
    options = parse_marker(first.admin_comment)
    assert options.managed and options.deadline == T0 + 2 * HOUR
    assert first.eligible_time == T0 + 2 * HOUR
    assert options.gpus_min == 1 and options.gpus_max == 4
    assert record.start[0] == T0 + 2 * HOUR


def test_fifo_releases_at_once_and_runtime_and_energy_follow_the_model():
    _, record = run(workload((0.0, 2, 2 * HOUR), (10.0, 2, 4 * HOUR)), FifoPolicy())
    # The second arrival waits for the next tick: ticks are at least min_tick_s (60 s) apart.
    assert record.start.tolist() == [T0, T0 + 60.0]
    assert np.allclose(record.end - record.start, [HOUR, 2 * HOUR])  # work / (2 GPUs x 1)
    assert np.allclose(record.energy_j, [200.0 * HOUR, 200.0 * 2 * HOUR])
    assert np.allclose(record.intensity, 100.0)


def test_the_prolog_applies_a_signed_cap_and_ignores_a_forged_one():
    capped = Scripted(lambda j, now: JobDecision(j.job_id, start_at=now, power_cap_fraction=0.5))
    _, record = run(workload((0.0, 1, HOUR)), capped)
    assert record.cap[0] == 0.5 and np.isclose(record.end[0] - record.start[0], 2 * HOUR)
    forged = Scripted(lambda j, now: JobDecision(j.job_id, start_at=now, power_cap_fraction=0.5))
    _, record = run(workload((0.0, 1, HOUR)), forged, signer_key=b"not-the-site-key-at-all")
    assert record.cap[0] == 1.0 and np.isclose(record.end[0] - record.start[0], HOUR)


def test_a_gpu_freq_level_slows_the_job_like_the_cap_it_stands_for():
    class ClocksDown(Scripted):
        def __call__(self, context):
            jobs = [j for j in context.snapshot.jobs if j.is_pending]
            return Plan(tuple(JobDecision(j.job_id, start_at=context.now, power_cap_fraction=0.5) for j in jobs))

    sim = Simulator(workload((0.0, 1, HOUR)), ONE_NODE, LinearModels(), flat_signal(), KEY, TraceOptions())
    controller = Controller(sim, ClocksDown(), SimCarbonFeed(flat_signal(), "flat"), LinearModels(),
                            sign=functools.partial(decision_token.sign, KEY),
                            verify=functools.partial(decision_token.verify, KEY), gpu_enact="gpu_freq")
    record = sim.run(controller, min_tick_s=60.0, max_tick_s=600.0)
    assert record.cap[0] == 0.5 and np.isclose(record.end[0] - record.start[0], 2 * HOUR)


def test_a_gpu_count_decision_changes_runtime():
    policy = Scripted(lambda j, now: JobDecision(j.job_id, start_at=now, gpus_per_node=4, num_nodes=1))
    sim, record = run(workload((0.0, 2, 4 * HOUR)), policy)
    assert record.gpus[0] == 4 and np.isclose(record.end[0] - record.start[0], HOUR)


@pytest.mark.parametrize(("expected_s", "limit_s", "past"), [(2 * HOUR, 2 * HOUR, 0), (None, HOUR, 1)])
def test_a_decision_that_slows_a_job_raises_its_limit_as_on_slurm(expected_s, limit_s, past):
    """A 1-hour job with a 1-hour limit, capped to half speed: with the decision's expected
    runtime the planner raises the limit (``SetTimeLimit``) before the start and the run keeps
    within it; without one the limit stays, and the run past it is counted (Slurm would stop it)."""
    slowed = Scripted(lambda j, now: JobDecision(j.job_id, start_at=now, power_cap_fraction=0.5,
                                                 expected_runtime_s=expected_s))
    wl = workload((0.0, 2, 2 * HOUR))
    _, record = run(wl, slowed, options=TraceOptions(flex_s=2 * HOUR, time_limit_factor=1.0))
    assert np.isclose(record.end[0] - record.start[0], 2 * HOUR)
    assert record.time_limit[0] == limit_s  # the limit in force when it started
    assert record.summary(wl.submit)["past_limit"] == past


def test_easy_backfill_lets_short_jobs_pass_but_protects_the_blocked_head():
    # t=0: A takes 2 of 4 GPUs for 10 h. t=1: B needs 4 (blocked until A ends).
    # t=2: C (2 GPUs, 1 h) ends before B's reservation: backfilled. t=3: D (2 GPUs, 20 h) would delay B: waits.
    wl = workload((0.0, 2, 20 * HOUR), (1.0, 4, 4 * HOUR), (2.0, 2, 2 * HOUR), (3.0, 2, 40 * HOUR))
    _, record = run(wl, FifoPolicy(), options=TraceOptions(flex_s=0.0, time_limit_factor=1.0))
    a, b, c, d = record.start - T0
    assert a == 0.0 and c == 2.0
    assert b == pytest.approx(10 * HOUR)
    assert d >= b


def test_the_backfill_reservation_holds_specific_nodes_so_a_whole_node_job_is_not_starved():
    # 2 nodes x 4 GPUs, exact time limits. R1 (3 GPUs, 1 h) lands on node 0, R2 (3 GPUs, 10 h) on
    # node 1. H needs a whole node: node 0 is reserved for it at 1 h. B (1 GPU, 5 h) would run past
    # that: it may take node 1's free GPU but not node 0's. Counting GPUs cluster-wide (2 free + 3
    # freed at 1 h >= 4) let B take node 0's, and H then waited for B, until 5 h.
    spec = ClusterSpec(nodes=2, gpus_per_node=4)
    wl = workload((0.0, 3, 3 * HOUR), (1.0, 3, 30 * HOUR), (2.0, 4, 4 * HOUR), (3.0, 1, 5 * HOUR))
    _, record = run(wl, FifoPolicy(), spec=spec, options=TraceOptions(flex_s=0.0, time_limit_factor=1.0))
    r1, r2, h, b = record.start - T0
    assert (r1, r2, b) == (0.0, 1.0, 3.0)
    assert h == pytest.approx(1 * HOUR)


def test_a_backfilled_job_that_ends_before_the_reservation_may_use_the_reserved_nodes():
    # As above, but R2 fills node 1 and B (1 GPU, 0.5 h) ends before H's reservation at 1 h: it
    # takes node 0's free GPU, the only one, and H still starts at 1 h.
    spec = ClusterSpec(nodes=2, gpus_per_node=4)
    wl = workload((0.0, 3, 3 * HOUR), (1.0, 4, 40 * HOUR), (2.0, 4, 4 * HOUR), (3.0, 1, 0.5 * HOUR))
    sim, record = run(wl, FifoPolicy(), spec=spec, options=TraceOptions(flex_s=0.0, time_limit_factor=1.0))
    r1, r2, h, b = record.start - T0
    assert b == 3.0 and h == pytest.approx(1 * HOUR)


def test_a_reservation_holds_whole_nodes_so_gpus_the_reserved_job_leaves_spare_are_not_backfilled():
    # R1 (2 GPUs, 1 h) on node 0, R2 fills node 1 for 10 h. H (3 GPUs) is reserved node 0 at 1 h,
    # where it leaves one GPU spare. B (1 GPU, 5 h) fits node 0 now and would fit beside H, but
    # Slurm's backfill holds the whole node (seen on 24.11: tests/integration/sim): B waits for H.
    spec = ClusterSpec(nodes=2, gpus_per_node=4)
    wl = workload((0.0, 2, 2 * HOUR), (1.0, 4, 40 * HOUR), (2.0, 3, 3 * HOUR), (3.0, 1, 5 * HOUR))
    _, record = run(wl, FifoPolicy(), spec=spec, options=TraceOptions(flex_s=0.0, time_limit_factor=1.0))
    r1, r2, h, b = record.start - T0
    assert h == b == pytest.approx(1 * HOUR)
    assert record.placed[3] == (0,)


def test_every_blocked_job_gets_a_reservation_not_only_the_first():
    # R1 (3 GPUs, 1 h) on node 0, R2 (3 GPUs, 2 h) on node 1: one GPU free on each. H1 needs both
    # nodes whole: reserved at 2 h. H2 (4 GPUs, 0.5 h) fits node 0 from 1 h to 1.5 h, before H1:
    # reserved there too. B (1 GPU, 1.5 h) would delay H2 on node 0, so it goes to node 1 (it
    # ends before H1's start); reserving for H1 alone put B on node 0 and started H2 at 1.5 h.
    spec = ClusterSpec(nodes=2, gpus_per_node=4)
    wl = workload((0.0, 3, 3 * HOUR), (1.0, 3, 6 * HOUR), (2.0, 8, 8 * HOUR), (3.0, 4, 2 * HOUR),
                  (4.0, 1, 1.5 * HOUR))
    _, record = run(wl, FifoPolicy(), spec=spec, options=TraceOptions(flex_s=0.0, time_limit_factor=1.0))
    r1, r2, h1, h2, b = record.start - T0
    assert (b, record.placed[4]) == (4.0, (1,))
    assert (h2, record.placed[3]) == (pytest.approx(1 * HOUR), (0,))
    assert h1 == pytest.approx(2 * HOUR + 1.0)  # R2 (started at 1 s) ends; B and H2 are done by then


def test_a_job_that_cannot_start_within_the_backfill_window_reserves_nothing():
    # H (4 GPUs) could start only when R (2 GPUs, 30 h) ends, beyond Slurm's one-day bf_window:
    # no reservation, so B (2 GPUs, 40 h) backfills on the free half of the node.
    wl = workload((0.0, 2, 60 * HOUR), (1.0, 4, 4 * HOUR), (2.0, 2, 80 * HOUR))
    _, record = run(wl, FifoPolicy(), options=TraceOptions(flex_s=0.0, time_limit_factor=1.0))
    r, h, b = record.start - T0
    assert b == 2.0 and h == pytest.approx(40 * HOUR + 2.0)


def test_a_long_job_that_cannot_backfill_does_not_end_the_pass_before_a_short_one_behind_it():
    # A holds half the node for 10 h; B (4 GPUs) is reserved it at 10 h. D (2 GPUs, 20 h) would
    # delay B; C behind it (2 GPUs, 1 h) ends before B's reservation and backfills. The pass stops
    # early only once every free GPU is reserved within the shortest time limit still queued.
    wl = workload((0.0, 2, 20 * HOUR), (1.0, 4, 4 * HOUR), (2.0, 2, 40 * HOUR), (3.0, 2, 2 * HOUR))
    _, record = run(wl, FifoPolicy(), options=TraceOptions(flex_s=0.0, time_limit_factor=1.0))
    a, b, d, c = record.start - T0
    assert c == 3.0 and b == pytest.approx(10 * HOUR) and d >= b


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 600).map(lambda m: m * 30.0), st.sampled_from([1, 2, 3, 4, 8]),
                          st.sampled_from([0.5, 1.0, 2.0, 8.0, 30.0]).map(lambda h: h * HOUR)), min_size=3, max_size=25))
def test_ending_a_backfill_pass_early_starts_the_same_jobs_on_the_same_nodes(jobs):
    """The pass's early end (``_backfill_closed``) against passes that always run to the end."""
    wl = workload(*sorted(jobs))
    spec = ClusterSpec(nodes=3, gpus_per_node=4)
    options = TraceOptions(flex_s=0.0, time_limit_factor=1.5)
    _, pruned = run(wl, FifoPolicy(), spec=spec, options=options)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Simulator, "_backfill_closed", lambda self, held, now, shortest_limit_s: False)
        _, full = run(wl, FifoPolicy(), spec=spec, options=options)
    assert pruned.start.tolist() == full.start.tolist()
    assert pruned.placed == full.placed


def test_a_workload_s_own_time_limits_are_used_and_nan_falls_back_to_the_derived_one():
    wl = workload((0.0, 1, HOUR), (1.0, 1, HOUR), (2.0, 1, HOUR))
    wl = Workload.from_columns(wl.name, wl.submit, wl.gpus, list(wl.job_type), work=wl.work,
                               time_limit_s=np.array([120.0, np.nan, 7200.0]))
    sim = Simulator(wl, ONE_NODE, LinearModels(), flat_signal(), KEY, TraceOptions(time_limit_factor=1.5))
    assert sim.time_limit.tolist() == [120.0, 1.5 * HOUR, 7200.0]
    assert wl.head(2).time_limit_s.tolist()[0] == 120.0
    derived = Simulator(workload((0.0, 1, HOUR)), ONE_NODE, LinearModels(), flat_signal(), KEY)
    assert derived.time_limit.tolist() == [1.5 * HOUR]  # no column at all: as before


def test_pinned_nodes_are_honoured():
    spec = ClusterSpec(nodes=2, gpus_per_node=4)
    policy = Scripted(lambda j, now: JobDecision(j.job_id, start_at=now, nodes=("sim0001",)))
    sim, record = run(workload((0.0, 2, HOUR)), policy, spec=spec)
    assert record.nodes[0] == 1
    assert sim._nodes[1].gpus_allocated == 0  # released again at completion


def test_actions_on_unknown_or_running_jobs_fail_typed():
    sim = Simulator(workload((0.0, 1, HOUR)), ONE_NODE, LinearModels(), flat_signal(), KEY,
                    TraceOptions(flex_s=0.0))
    sim.run(Controller(sim, FifoPolicy(), None, LinearModels()), min_tick_s=60.0)
    assert sim.apply([SetStartTime(99, T0)])[0].error is ActionError.JOB_GONE
    sim2 = Simulator(workload((0.0, 1, 10 * HOUR)), ONE_NODE, LinearModels(), flat_signal(), KEY,
                     TraceOptions(flex_s=0.0))
    sim2._arrive(0)
    sim2._schedule(T0)
    assert sim2.apply([SetGpus(1, 2)])[0].error is ActionError.NOT_PENDING


def test_runner_reports_summary_metrics():
    result = simulate(workload((0.0, 2, 2 * HOUR), (0.0, 4, 4 * HOUR)), ONE_NODE, FifoPolicy(), flat_signal(),
                      LinearModels(), options=TraceOptions(flex_s=0.0))
    s = result.summary
    assert s["finished"] == 2 and s["makespan_s"] == pytest.approx(2 * HOUR)
    assert s["avg_jct_s"] == pytest.approx((HOUR + 2 * HOUR) / 2)
    assert s["energy_kwh"] == pytest.approx((200 * HOUR + 400 * HOUR) / 3.6e6)
    assert s["carbon_kg"] == pytest.approx(s["energy_kwh"] * 100.0 / 1000.0)


@dataclass(frozen=True)
class HotModel:
    """The truth of a site whose GPUs draw 1.5x what the controller's models believe."""

    job_type: str = "linear"

    def throughput(self, config):
        return config.gpus * config.cap_fraction

    def power_w(self, config):
        return config.gpus * 150.0 * config.cap_fraction


class HotModels:
    def for_job(self, job_type, gpu=None):
        return HotModel()


class LearningModels(LinearModels):
    def __init__(self):
        self.observed = []

    def learn(self, seen):
        self.observed.append((seen.job_type, seen.config, seen.throughput, seen.power_w))


@pytest.mark.parametrize("learn", [True, False])
def test_finished_jobs_teach_the_controllers_models_the_truth_when_learning(learn):
    belief = LearningModels()
    result = simulate(workload((0.0, 2, 2 * HOUR), (0.0, 4, 4 * HOUR)), ONE_NODE, FifoPolicy(), flat_signal(),
                      belief, options=TraceOptions(flex_s=0.0), truth=HotModels(), learn=learn)
    assert result.summary["energy_kwh"] == pytest.approx((300 * HOUR + 600 * HOUR) / 3.6e6)  # the truth's power
    if learn:
        assert sorted((c.gpus, t, p) for _, c, t, p in belief.observed) == [(2, 2.0, 300.0), (4, 4.0, 600.0)]
    else:
        assert belief.observed == []
