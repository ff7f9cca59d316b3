"""Co-location in the simulator: a ShareGpus'd job runs on its partner's GPU at the pair's
rates and power, and returns to its solo rate when the partner ends (through the controller)."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_literals import HOUR, T0, LinearModel, flat_signal, workload
from slurm_green.carbon.signal import CarbonSignal
from slurm_green.controller.tick import Controller
from slurm_green.core import decision_token
from slurm_green.core.actions import SetTimeLimit, ShareGpus
from slurm_green.core.cluster import JobState
from slurm_green.core.cluster import ClusterSnapshot
from slurm_green.core.models import Config
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.policy.baselines import FifoPolicy
from slurm_green.policy.eaco import EaCoPolicy, pair_at_caps
from slurm_green.sim.carbon import SimCarbonFeed
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.models.registry import default_registry
from slurm_green.sim.engine import Simulator, TraceOptions
from slurm_green.sim.workload import Workload

KEY = b"0123456789abcdef-sim-test-key"
NODE = ClusterSpec(nodes=1, gpus_per_node=4, idle_w_per_gpu=20.0)
SHARING = TraceOptions(flex_s=2 * HOUR, accept_share=1.0)
GUEST_SLOW, HOST_SLOW, PAIR_W = 1.25, 1.5, 150.0


class PairModels:
    """The linear model (1 work unit per GPU-second, 100 W per GPU) and a literal pair: the
    second job of a pair (the host) slowed 1.5x, the first 1.25x, the GPU at 150 W."""

    slowdown: tuple[float, float] = (GUEST_SLOW, HOST_SLOW)
    revision = 0

    def for_job(self, job_type: str | None, gpu: str | None = None) -> LinearModel:
        return LinearModel()

    def allowed_caps(self, gpu=None, *, accept_cap=True, floor=0.0, step=0.05):
        return (1.0,)  # a board that cannot be capped: pairs run at full power

    def colocation_arrays(self, a, b, gpu=None, mechanism="timeslice", power_a_w=None, power_b_w=None,
                          cap_fraction=None):
        return np.full(len(a), self.slowdown[0]), np.full(len(a), self.slowdown[1]), np.full(len(a), PAIR_W)

    def colocated_slowdown(self, a, b, gpu=None, mechanism="timeslice"):
        return self.slowdown

    def colocation(self, a, b, gpu=None, mechanism="timeslice", power_a_w=None, power_b_w=None, cap_fraction=None):
        return (*self.slowdown, PAIR_W)


@dataclass
class Pairing:
    """Job 1 alone now; every later job shares job 1's GPU; remembers each snapshot."""

    name: str = "pairing"
    seen: list[ClusterSnapshot] = field(default_factory=list)

    def __call__(self, context):
        snapshot = context.snapshot
        self.seen.append(snapshot)
        return Plan(tuple(JobDecision(j.job_id, start_at=context.now, nodes=("sim0000",),
                                      share_with=None if j.job_id == 1 else 1)
                          for j in snapshot.jobs if j.is_pending))


def run(wl, policy, options=SHARING, models=None, spec=NODE, signal=None):
    models = models or PairModels()
    signal = signal or flat_signal()
    sim = Simulator(wl, spec, models, signal, KEY, options)
    controller = Controller(sim, policy, SimCarbonFeed(signal, "flat"), models,
                            sign=functools.partial(decision_token.sign, KEY),
                            verify=functools.partial(decision_token.verify, KEY))
    return sim, sim.run(controller, min_tick_s=60.0, max_tick_s=600.0)


def test_a_pair_shares_one_gpu_and_the_survivor_returns_to_its_solo_rate():
    policy = Pairing()
    # Job 3 arrives while the pair runs (so the policy sees it) and, the GPU holding a pair, runs alone.
    sim, record = run(workload((0.0, 1, HOUR), (0.0, 1, 2 * HOUR), (1200.0, 1, 600.0)), policy)
    host_end = T0 + HOUR * HOST_SLOW  # 5,400 s at 1/1.5 of its rate
    guest_left = 2 * HOUR - HOUR * HOST_SLOW / GUEST_SLOW  # work the guest has left then
    assert record.start.tolist() == [T0, T0, T0 + 1200.0]
    assert record.end.tolist() == pytest.approx([host_end, host_end + guest_left, T0 + 1800.0])
    half = PAIR_W / 2  # the pair's power split by the two jobs' power alone (equal here)
    assert record.energy_j.tolist() == pytest.approx([half * HOUR * HOST_SLOW,
                                                      half * HOUR * HOST_SLOW + 100.0 * guest_left, 100.0 * 600])
    assert record.gpus.tolist() == [1, 1, 1]
    assert max(record.sample_busy) == 2 and max(record.sample_shared) == 1
    shared = next(s for s in policy.seen if len(s.running()) == 2)
    host, guest = sorted(shared.running(), key=lambda j: j.job_id)
    assert (guest.gpus_per_node, guest.shards_per_node, guest.nodes) == (0, 1, host.nodes)
    # the host was bound to its guest when it started: on shards, as Slurm shows it, so EaCO may join it
    assert (host.gpus_per_node, host.shards_per_node) == (0, 1)
    assert shared.nodes[0].gpus_allocated == 1


def test_the_guest_ending_first_returns_the_host_to_its_solo_rate():
    _, record = run(workload((0.0, 1, 4 * HOUR), (0.0, 1, HOUR)), Pairing())
    guest_end = T0 + HOUR * GUEST_SLOW
    host_left = 4 * HOUR - HOUR * GUEST_SLOW / HOST_SLOW
    assert record.end.tolist() == pytest.approx([guest_end + host_left, guest_end])


def test_the_run_ends_with_its_last_job_not_where_a_moved_end_used_to_be():
    """The host sped up when its guest ended, so its end moved 1.6 h earlier; the end it had
    was left in the queue of events, and the run went on to it with every GPU idle, charging
    them idle power (EaCO on Gavel at share 0.5: a run of 3,121 h for jobs done in 2,222)."""
    _, record = run(workload((0.0, 1, 4 * HOUR), (0.0, 1, HOUR)), Pairing())
    assert record.end.max() < T0 + 4 * HOUR * HOST_SLOW  # where the host's end was first put
    assert record.ended_at == record.end.max()
    # One GPU of the four holds the pair, then the host alone, until the last end; three idle.
    assert record.idle_energy_kwh == pytest.approx(3 * NODE.idle_w_per_gpu * (record.end.max() - T0) / 3.6e6)


@pytest.mark.parametrize("gpus_per_node", [2, 1])
def test_a_guest_starts_with_its_host_in_the_same_pass_even_when_the_host_takes_the_last_gpu(gpus_per_node):
    """Slurm starts the shard job in the pass that starts its partner: on a full node (1 GPU)
    too, where the pass ends with no GPU free (the guest needs none)."""
    spec = ClusterSpec(nodes=1, gpus_per_node=gpus_per_node, idle_w_per_gpu=20.0)
    _, record = run(workload((0.0, 1, HOUR), (0.0, 1, HOUR)), Pairing(), spec=spec)
    assert record.start.tolist() == [T0, T0]
    assert max(record.sample_shared) == 1


def stepped_signal(clean_hours: int, clean: float = 100.0, dirty: float = 500.0) -> CarbonSignal:
    """``clean`` g/kWh from an hour before T0 to ``clean_hours`` after it, then ``dirty``."""
    values = [clean] * (clean_hours + 1) + [dirty] * 24 * 10
    index = pd.date_range(pd.Timestamp(T0 - HOUR, unit="s", tz="UTC"), periods=len(values), freq="h")
    return CarbonSignal.from_series(pd.Series(np.asarray(values), index=index))


def test_a_job_whose_power_changes_is_charged_each_stretch_at_the_intensity_then():
    """The host draws its share of the pair's power while its guest runs, in a clean hour,
    and its solo power after, mostly in a dirty one: its carbon is each stretch's energy times
    the intensity then, not its whole energy times its run's mean intensity."""
    signal = stepped_signal(2)
    _, record = run(workload((0.0, 1, 4 * HOUR), (0.0, 1, HOUR)), Pairing(), signal=signal)
    assert max(record.sample_shared) == 1
    shared_h = GUEST_SLOW  # the guest's hour of work at its pair rate
    host_left_h = 4 - shared_h / HOST_SLOW
    share_w = PAIR_W / 2  # the pair's power split by the jobs' equal solo power
    host_g = (share_w * shared_h * 100 + 100 * (2 - shared_h) * 100 + 100 * (host_left_h - (2 - shared_h)) * 500) / 1000
    guest_g = share_w * shared_h * 100 / 1000
    exact_kg = (host_g + guest_g) / 1000
    assert record.jobs_carbon_kg(signal, T0, T0 + 10 * HOUR) == pytest.approx(exact_kg)  # the samples agree
    summary = record.summary(workload((0.0, 1, 4 * HOUR), (0.0, 1, HOUR)).submit)
    assert summary["carbon_kg"] == pytest.approx(exact_kg, rel=1e-9)


def test_sharing_is_idempotent_and_a_second_guest_of_a_pair_starts_alone():
    policy = Pairing()
    _, record = run(workload((0.0, 1, HOUR), (0.0, 1, HOUR), (0.0, 1, HOUR)), policy)
    assert max(record.sample_busy) == 2  # jobs 1+2 on one GPU, job 3 on its own
    assert max(record.sample_shared) == 1


def test_a_job_that_refuses_sharing_is_never_bound_and_runs_alone():
    _, record = run(workload((0.0, 1, HOUR), (0.0, 1, HOUR)), Pairing(), options=TraceOptions(flex_s=2 * HOUR))
    assert record.end.tolist() == [T0 + HOUR, T0 + HOUR] and max(record.sample_shared) == 0


def test_a_running_jobs_time_limit_is_raised_as_on_slurm_its_end_and_backfills_view_with_it():
    """What the planner sends a running host a guest joins: its EndTime (start + limit), the
    end backfill reserves by and the limit its run is judged by (``past_limit``) all move."""
    sim = Simulator(workload((0.0, 1, HOUR)), NODE, PairModels(), flat_signal(), KEY, TraceOptions(flex_s=0.0))
    sim._arrive(0)
    sim._schedule(T0)
    job = sim.snapshot().jobs[0]
    assert job.state is JobState.RUNNING and job.end_time == T0 + job.time_limit_s
    [result] = sim.apply([SetTimeLimit(1, 2 * HOUR + 1)])  # up to whole minutes, as Slurm keeps it
    raised = sim.snapshot().jobs[0]
    assert result.ok and raised.time_limit_s == 2 * HOUR + 60 and raised.end_time == T0 + 2 * HOUR + 60
    assert sim._free_profile(T0).times.tolist() == [T0, T0 + 2 * HOUR + 60]
    assert sim.record.time_limit[0] == 2 * HOUR + 60
    [refused] = sim.apply([SetTimeLimit(1, 0.0)])
    assert not refused.ok and sim.snapshot().jobs[0].time_limit_s == 2 * HOUR + 60


def test_share_gpus_names_an_active_partner():
    sim = Simulator(workload((0.0, 1, HOUR)), NODE, PairModels(), flat_signal(), KEY, SHARING)
    sim._arrive(0)
    [result] = sim.apply([ShareGpus(1, 9)])
    assert not result.ok and "not another active job" in result.message


def test_idle_power_counts_in_the_total_and_a_freed_gpu_saves_its_busy_power():
    wl = workload((0.0, 1, HOUR), (0.0, 1, HOUR))
    _, alone = run(wl, FifoPolicy())
    sim, paired = run(wl, Pairing())
    s_alone, s_paired = alone.summary(wl.submit), paired.summary(wl.submit)
    assert s_alone["total_energy_kwh"] == pytest.approx(s_alone["energy_kwh"] + s_alone["idle_energy_kwh"])
    assert s_paired["shared_share"] > 0 and s_alone["shared_share"] == 0
    assert s_paired["unallocated_share"] > s_alone["unallocated_share"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7200), st.sampled_from((1, 1, 1, 2)), st.integers(600, 4 * 3600)),
                min_size=2, max_size=12),
       st.floats(0.0, 1.0), st.sampled_from((1.1, 1.25, 2.5)), st.sampled_from((1, 4)))
def test_eaco_in_the_simulator_never_overcommits_and_every_job_finishes_its_work(rows, share, bound, max_gpus):
    """EaCO through the controller: at most two jobs per GPU (allocated GPUs never exceed the
    node), a job whose user refused sharing never shares, every job's work is done."""
    rows = sorted(rows)
    wl = workload(*[(float(t), g, float(w)) for t, g, w in rows])
    models = PairModels()
    options = TraceOptions(flex_s=2 * HOUR, accept_share=share, share_seed=3)
    policy = EaCoPolicy(slowdown_bound=bound, max_gpus=max_gpus)
    sim, record = run(wl, policy, options, models)
    assert np.isfinite(record.end).all()
    assert max(record.sample_busy) <= NODE.gpus and max(record.sample_shared) <= max(record.sample_busy)
    shared_any = record.sample_shared and max(record.sample_shared) > 0
    if bound < max(models.slowdown) or not sim.shares.any():
        assert not shared_any
    # Work done: solo-rate jobs took work / GPUs; shared ones longer, never shorter.
    runtime = record.end - record.start
    assert (runtime >= np.array([w for _, _, w in rows]) / record.gpus - 1e-6).all()
    refused = ~sim.shares
    assert (runtime[refused] == pytest.approx(np.array([w for _, _, w in rows])[refused] / record.gpus[refused]))


def test_a_two_gpu_pair_shares_both_gpus_of_its_host_and_shows_its_whole_gpus():
    policy = Pairing()
    _, record = run(workload((0.0, 2, 2 * HOUR), (0.0, 2, 4 * HOUR), (1200.0, 1, 600.0)), policy)  # 3: a tick
    shared = next(s for s in policy.seen if len(s.running()) == 2)
    # Slurm's shards of a node come from one GPU: a two-GPU share has no Slurm form, shown whole
    assert {(j.gpus_per_node, j.shards_per_node) for j in shared.running()} == {(2, 0)}
    assert max(record.sample_busy) == 3 and max(record.sample_shared) == 2  # the pair's 2 GPUs and job 3's
    assert record.end.tolist()[:2] == pytest.approx([T0 + HOUR * HOST_SLOW, T0 + HOUR * HOST_SLOW + 2 * HOUR
                                                     - HOUR * HOST_SLOW / GUEST_SLOW])


class CappedPairs(PairModels):
    """``PairModels`` on a board that takes caps: records the cap each pair is asked under."""

    def __init__(self) -> None:
        self.asked: list[float | None] = []

    def allowed_caps(self, gpu=None, *, accept_cap=True, floor=0.0, step=0.05):
        return (0.4, 0.55, 0.6, 1.0)

    def colocation(self, a, b, gpu=None, mechanism="timeslice", power_a_w=None, power_b_w=None, cap_fraction=None):
        self.asked.append(cap_fraction)
        return (*self.slowdown, PAIR_W)


@dataclass
class CappedPairing(Pairing):
    """``Pairing`` with a cap per job (by job id, from 1)."""

    caps: tuple[float, ...] = ()

    def __call__(self, context):
        plan = super().__call__(context)
        return Plan(tuple(dataclasses.replace(d, power_cap_fraction=self.caps[d.job_id - 1]) for d in plan.decisions))


def test_a_pair_is_asked_of_the_models_under_the_loosest_cap_of_its_two_jobs():
    """The shared GPU runs at the loosest limit its jobs ask for (``gpu/enact.py``; the planner
    gives both jobs of a pair that one): that cap bounds the pair's power; an uncapped pair is
    asked at 1.0, which the models take as no cap (``power_cap.capped_board_w``)."""
    for caps, asked in (((0.4, 0.4), 0.4), ((0.4, 0.6), 0.6), ((0.6, 0.4), 0.6), ((1.0, 0.4), 1.0)):
        models = CappedPairs()
        _, record = run(workload((0.0, 1, HOUR), (0.0, 1, HOUR)), CappedPairing(caps=caps), models=models)
        assert max(record.sample_shared) == 1 and record.cap.tolist() == [asked] * 2, (caps, record.cap)
        assert models.asked == [asked], (caps, models.asked)


def test_a_capped_h100_pair_is_charged_no_more_than_its_cap_allows():
    """resnet50 and resnet18 under MPS on one H100 capped at 0.55 (385 W), EaCO's pair: the model
    put the pair at 440 W, over the limit the Prolog set; the simulator charges what the cap allows."""
    cap, types = 0.55, ["ResNet-50 (batch size 64)", "ResNet-18 (batch size 64)"]
    models = default_registry("h100")
    spec = ClusterSpec(nodes=1, gpus_per_node=2, gpu_type="h100", share_mechanism="mps", idle_w_per_gpu=87.0)
    wl = Workload.from_columns("test", np.array([T0, T0]), np.array([1, 1]), types,
                               duration_s=np.array([2 * HOUR, 2 * HOUR]))
    solo = [models.for_job(t, "h100").power_w(Config(1, 1, cap)) for t in types]
    assert models.colocation(*types, "h100", "mps", *solo)[2] > cap * 700.0  # uncapped, the pair is over it
    sim = Simulator(wl, spec, models, flat_signal(), KEY, SHARING)
    controller = Controller(sim, CappedPairing(caps=(cap, cap)), SimCarbonFeed(flat_signal(), "flat"), models,
                            sign=functools.partial(decision_token.sign, KEY),
                            verify=functools.partial(decision_token.verify, KEY))
    record = sim.run(controller, min_tick_s=60.0, max_tick_s=600.0)
    assert max(record.sample_shared) == 1 and record.cap.tolist() == [cap, cap]
    shared_w = max(p for p, s in zip(record.sample_power_w, record.sample_shared, strict=True) if s)
    assert shared_w <= cap * 700.0, f"pair charged {shared_w:.0f} W under a {cap * 700:.0f} W cap"
    assert shared_w == pytest.approx(models.colocation(*types, "h100", "mps", *solo, cap_fraction=cap)[2])
    # what EaCO and GreenFlow's priced sharing price the pair at under that cap
    assert shared_w == pytest.approx(pair_at_caps(models, *types, "h100", "mps", [cap]).pair_w[0])


def test_a_pair_clipped_by_its_cap_runs_longer_and_saves_no_energy():
    """Two ResNet-18 (batch size 64) time-sliced on one V100 capped at 0.4: they slow each other
    by nothing and would draw 141 W, the board holds 96 W. The clocks drop to hold it, and no
    time-sliced pair was measured under a clip: both run longer by the clip's ratio of dynamic
    power, ``(demand - idle) / (bound - idle)``, and the pair's energy is no lower than
    unclipped. Before, the simulator charged 96 W for the time at 141 W: a saving nothing measured."""
    cap, job_type = 0.4, "ResNet-18 (batch size 64)"
    models = default_registry("v100")
    board = models.type_params("v100")[0].gpu
    spec = ClusterSpec(nodes=1, gpus_per_node=2, gpu_type="v100", idle_w_per_gpu=board.idle_w)
    wl = Workload.from_columns("test", np.array([T0, T0]), np.array([1, 1]), [job_type] * 2,
                               duration_s=np.array([2 * HOUR, 2 * HOUR]))
    model = models.for_job(job_type, "v100")
    solo_w, rate = model.power_w(Config(1, 1, cap)), model.throughput(Config(1, 1, cap)) / model.throughput(Config(1))
    slow = models.colocated_slowdown(job_type, job_type, "v100")  # Gavel's pair, measured at full power
    scale = models.params.colocation_load["timeslice"].power_scale
    demand = board.idle_w + scale * sum((solo_w - board.idle_w) / s for s in slow)
    bound = board.draw_ratio * cap * board.tdp_w
    ratio = (demand - board.idle_w) / (bound - board.idle_w)
    assert ratio > 1.7  # the clip binds: 141 W wanted, 96 W allowed
    record = run(wl, CappedPairing(caps=(cap, cap)), models=models, spec=spec)[1]
    assert max(record.sample_shared) == 1 and record.cap.tolist() == [cap, cap]
    stretch = [s * ratio / rate for s in slow]
    assert (record.end - record.start).tolist() == pytest.approx([2 * HOUR * x for x in stretch], rel=1e-3)
    shared_w = max(p for p, s in zip(record.sample_power_w, record.sample_shared, strict=True) if s)
    assert shared_w == pytest.approx(bound)
    unclipped_j = demand * 2 * HOUR * max(slow) / rate  # the pair at the power it wanted, for as long as it needs
    assert record.energy_j.sum() >= unclipped_j * (1 - 1e-3)
