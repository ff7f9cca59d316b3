"""EaCO: who shares with whom, within the slowdown bound, the share limit and the users' consent."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_literals import HOUR, NOW, context, nodes

from slurm_green.controller.planner import plan_actions, within_max_time
from slurm_green.core import decision_token
from slurm_green.core.actions import SetTimeLimit
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState, Partition
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.core.models import Config
from slurm_green.models.registry import default_registry
from slurm_green.policy.eaco import EaCoPolicy

LIGHT = "ResNet-18 (batch size 16)"
LIGHT2 = "Recommendation (batch size 512)"
HEAVY = "ResNet-50 (batch size 64)"
TYPES = (LIGHT, LIGHT2, HEAVY, "LM (batch size 20)", "Transformer (batch size 32)", "CycleGAN")


@pytest.fixture(scope="module")
def models():
    return default_registry()


def job(job_id: int, name: str, share: bool = True, state: JobState = JobState.PENDING, gpus: int = 1,
        node: str | None = None, shards: int = 0, low: int | None = None, high: int | None = None) -> Job:
    marker = format_marker(GreenOptions(max_delay_s=6 * HOUR, accept_share=share, gpus_min=low, gpus_max=high,
                                        deadline=NOW + 6 * HOUR))
    running = state is JobState.RUNNING
    return Job(job_id, name=name, state=state, submit_time=NOW - 100 + job_id, time_limit_s=HOUR,
               gpus_per_node=0 if shards else gpus, shards_per_node=shards,
               nodes=(node,) if node else (), start_time=NOW - 50 if running else None, admin_comment=marker)


def decide(jobs: list[Job], models, free_nodes: int = 2, **knobs):
    snap = ClusterSnapshot(taken_at=NOW, jobs=tuple(jobs), nodes=nodes(free_nodes))
    return {d.job_id: d for d in EaCoPolicy(**knobs)(context(snap, None, models)).decisions}


def test_a_light_pair_shares_the_gpu_of_a_job_running_on_shards_on_its_node(models):
    plan = decide([job(1, LIGHT, state=JobState.RUNNING, node="n1", shards=2), job(2, LIGHT2)], models)
    assert plan[2].share_with == 1
    assert plan[2].nodes == ("n1",)
    assert "1.00x" in plan[2].reason and 1 not in plan


def test_a_job_running_on_whole_gpus_hosts_nobody(models):
    """Slurm gives no shards of a GPU allocated whole: such a pair would run apart."""
    plan = decide([job(1, LIGHT, state=JobState.RUNNING, node="n1"), job(2, LIGHT2)], models, free_nodes=0)
    assert plan[2].share_with is None and plan[2].start_at == NOW


@pytest.mark.parametrize("host_share, guest_share", [(True, False), (False, True), (False, False)])
def test_no_job_shares_unless_both_accept(models, host_share, guest_share):
    plan = decide([job(1, LIGHT, share=host_share, state=JobState.RUNNING, node="n0", shards=2),
                   job(2, LIGHT2, share=guest_share)], models)
    assert plan[2].share_with is None
    assert plan[2].start_at == NOW


def test_a_pair_beyond_the_slowdown_bound_is_not_colocated_and_a_looser_bound_allows_it(models):
    jobs = [job(1, HEAVY, state=JobState.RUNNING, node="n0", shards=2), job(2, HEAVY)]
    assert decide(jobs, models)[2].share_with is None
    assert decide(jobs, models, slowdown_bound=2.1)[2].share_with == 1


@pytest.mark.parametrize("host_gpus, guest_gpus", [(2, 1), (1, 2), (2, 2)])
def test_only_one_gpu_jobs_share_a_gpu(models, host_gpus, guest_gpus):
    plan = decide([job(1, LIGHT, gpus=host_gpus, low=1, high=4), job(2, LIGHT2, gpus=guest_gpus, low=1, high=4)],
                  models)
    assert plan[2].share_with is None


def test_a_job_submitted_with_shards_pairs_as_a_one_gpu_job(models):
    """``--gres=shard:2`` reads as no whole GPU: still a job of one GPU (the only pairs Slurm 22.05 enacts)."""
    plan = decide([job(1, LIGHT, shards=2), job(2, LIGHT2, shards=2)], models)
    assert plan[2].share_with == 1 and plan[2].nodes == plan[1].nodes and plan[1].nodes


def test_with_a_larger_max_gpus_jobs_of_one_layout_released_together_pair_gpu_by_gpu(models):
    jobs = [job(1, LIGHT, gpus=2), job(2, LIGHT2, gpus=2), job(3, LIGHT2, gpus=1)]
    plan = decide(jobs, models, max_gpus=4)
    assert plan[2].share_with == 1 and plan[2].nodes == plan[1].nodes
    assert plan[3].share_with is None  # one GPU beside a two-GPU job: not the same layout


def test_the_share_limit_counts_the_partners_already_running(models):
    partner = replace(job(2, LIGHT2, state=JobState.RUNNING, node="n0", shards=2),
                      comment=decision_token.sign(b"k" * 16, 2, {"share": 1}))
    jobs = [job(1, LIGHT, state=JobState.RUNNING, node="n0", shards=2), partner, job(3, LIGHT2), job(4, LIGHT2)]
    assert decide(jobs, models, free_nodes=0)[3].share_with is None
    plan = decide(jobs, models, free_nodes=0, share_limit=3)
    assert plan[3].share_with == 1 and plan[4].share_with is None  # one host per GPU: its first job


def test_a_pending_job_released_onto_a_free_gpu_hosts_a_later_one_both_pinned_to_one_node(models):
    snap = ClusterSnapshot(taken_at=NOW, jobs=(job(1, LIGHT), job(2, LIGHT2), job(3, LIGHT)),
                           nodes=nodes(2, used={1: (0, 1, 2)}))
    plan = {d.job_id: d for d in EaCoPolicy()(context(snap, None, models)).decisions}
    assert plan[1].share_with is None and plan[1].nodes == ("n1",)  # the fullest node with a free GPU
    assert plan[2].share_with == 1 and plan[2].nodes == ("n1",)
    assert plan[3].share_with is None  # job 1's one slot is taken: 3 starts on a free GPU


def test_without_free_gpus_a_pending_job_is_no_host(models):
    plan = decide([job(1, LIGHT), job(2, LIGHT2)], models, free_nodes=0)
    assert plan[2].share_with is None


def test_three_jobs_on_one_gpu_run_under_the_first_pairs_cap(models):
    """Found by the property below: the first pair (two ResNet-18s) kept full power, a third
    job (LM) then capped the host to 0.6 while the second guest was left at full power."""
    plan = decide([job(1, LIGHT), job(2, LIGHT), job(3, "LM (batch size 20)")], models, free_nodes=10,
                  share_limit=3, slowdown_bound=1.25)
    guests = [d for d in plan.values() if d.share_with == 1]
    assert len(guests) == 2
    assert {d.power_cap_fraction for d in (plan[1], *guests)} == {plan[1].power_cap_fraction}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TYPES), st.booleans(), st.booleans(), st.sampled_from((1, 2, 4)),
                          st.sampled_from((None, 0.4, 0.6, 0.8))),
                min_size=1, max_size=14),
       st.integers(2, 3), st.sampled_from((1.1, 1.25, 1.5)))
def test_limits_consent_bound_and_one_cap_hold_on_random_queues(models, rows, limit, bound):
    """Running jobs on whole GPUs on n0..n3 and on shards on n4..n7 (one each, some under a token's
    cap), pending jobs after them; every decided pair respects the bound, under its cap too, both
    consented, the host runs on shards or starts now, a pair released together has one cap, and
    no GPU holds more than ``limit`` jobs."""
    jobs = []
    for i, (name, share, running, gpus, cap) in enumerate(rows, start=1):
        if running and i <= 8:
            jobs.append(replace(job(i, name, share=share, state=JobState.RUNNING, gpus=gpus, node=f"n{i - 1}",
                                    shards=2 if i > 4 else 0),
                                comment=decision_token.sign(b"k" * 16, i, {"cap": cap}) if cap else ""))
        else:
            jobs.append(job(i, name, share=share, gpus=gpus, low=1, high=4))
    by_id = {j.job_id: j for j in jobs}
    plan = decide(jobs, models, free_nodes=10, share_limit=limit, slowdown_bound=bound)
    per_host: dict[int, int] = {}
    for d in plan.values():
        if d.share_with is None:
            continue
        guest, host = by_id[d.job_id], by_id[d.share_with]
        assert guest.is_pending and (host.is_pending or (host.shards_per_node and not host.gpus_per_node))
        assert max(1, guest.total_gpus) == max(1, host.total_gpus) == 1
        assert _accepts(guest) and _accepts(host)
        assert max(models.colocated_slowdown(guest.name, host.name, None)) <= bound
        assert d.expected_runtime_s <= bound * HOUR * (1 + 1e-9) and (d.partner_stretch or 1.0) <= bound * (1 + 1e-9)
        assert plan.get(host.job_id) is None or plan[host.job_id].share_with is None  # a guest is no host
        if host.is_pending:
            assert plan[host.job_id].power_cap_fraction == d.power_cap_fraction
        per_host[host.job_id] = per_host.get(host.job_id, 0) + 1
    assert all(1 + n <= limit for n in per_host.values())


def _accepts(j: Job) -> bool:
    return "share=1" in j.admin_comment


def test_a_shard_job_beside_another_that_is_not_its_partner_hosts_nobody(models):
    """Which GPU each of two unrelated shard jobs of a node holds is not in the snapshot."""
    jobs = [job(1, LIGHT, state=JobState.RUNNING, node="n0", shards=2),
            job(2, LIGHT, state=JobState.RUNNING, node="n0", shards=2), job(3, LIGHT2)]
    assert decide(jobs, models, free_nodes=0)[3].share_with is None


def test_a_pair_released_together_gets_one_energy_optimal_cap_within_the_bound(models):
    pair = ("LM (batch size 20)", LIGHT)
    plan = decide([job(1, pair[0]), job(2, pair[1])], models)
    cap = plan[2].power_cap_fraction
    assert plan[2].share_with == 1 and plan[1].power_cap_fraction == cap
    caps = models.allowed_caps(None)
    assert cap in caps and cap < 1.0
    energy = {}
    for c in caps:  # the pair's energy per unit of both jobs' work at every cap, stretches within 1.25
        a, b = (models.for_job(t) for t in pair)
        rate = [m.throughput(Config(1, 1, c)) / m.throughput(Config(1)) for m in (a, b)]
        slow_a, slow_b, watts = models.colocation(*pair, None, "timeslice", a.power_w(Config(1, 1, c)),
                                                  b.power_w(Config(1, 1, c)))
        if slow_a / rate[0] <= 1.25 and slow_b / rate[1] <= 1.25:
            energy[c] = watts / (rate[0] / slow_a + rate[1] / slow_b)
    assert energy[cap] == pytest.approx(min(energy.values()))


def _pair_under_cap(models, pair: tuple[str, str], cap: float) -> tuple[float, float]:
    """The shared V100's power and its jobs' stretch from the clip, as docs/models.md writes
    them: the pair would draw ``idle + s * (dyn_a / slow_a + dyn_b / slow_b)``, ``dyn`` a job's
    power alone at the cap less idle; the board draws at most ``max(idle, draw_ratio * cap *
    TDP)`` under the cap (below 1.0; 1.0 is no cap), and where that binds both jobs run longer by
    ``(demand - idle) / (bound - idle)`` (no time-sliced pair measured under a clip)."""
    board = models.type_params(None)[0].gpu
    scale = models.params.colocation_load["timeslice"].power_scale
    slow = models.colocated_slowdown(*pair, None, "timeslice")  # a measured pair: not from its power
    dyn = sum((models.for_job(t).power_w(Config(1, 1, cap)) - board.idle_w) / s for t, s in zip(pair, slow))
    demand = min(board.idle_w + scale * dyn, board.tdp_w)
    bound = board.tdp_w if cap >= 1.0 else max(board.idle_w, board.draw_ratio * cap * board.tdp_w)
    return min(demand, bound), max(1.0, (demand - board.idle_w) / (bound - board.idle_w))


def test_a_pairs_cap_is_chosen_on_its_power_and_time_under_that_cap(models):
    """Two ResNet-18 (batch size 64) slow each other by nothing on a V100 and draw 141 W at full
    power, more than the board draws under a low cap (96 W at 0.4): the pair's energy at a cap
    is its power bounded by that cap over the work it does in the time the clip stretches it
    to, as the simulator runs it. Without the clip's stretch a binding cap looked free and the
    pair ran at 0.4; with it, no cap saves energy the pair would not save at full power."""
    pair = ("ResNet-18 (batch size 64)",) * 2
    plan = decide([job(1, pair[0]), job(2, pair[1])], models)
    energy, clip = {}, {}
    for c in models.allowed_caps(None):  # energy per unit of both jobs' work, stretches within 1.25
        rate = [models.for_job(t).throughput(Config(1, 1, c)) / models.for_job(t).throughput(Config(1)) for t in pair]
        watts, clip[c] = _pair_under_cap(models, pair, c)
        slow = [s * clip[c] for s in models.colocated_slowdown(*pair, None, "timeslice")]
        if max(s / r for s, r in zip(slow, rate)) <= 1.25:
            energy[c] = watts / sum(r / s for r, s in zip(rate, slow))
    best = max(c for c, e in energy.items() if e == pytest.approx(min(energy.values()), rel=1e-9))
    assert clip[best] == 1.0 and any(x > 1.0 for x in clip.values())  # caps that bind are not chosen for it
    assert plan[2].share_with == 1 and plan[2].power_cap_fraction == plan[1].power_cap_fraction
    assert (plan[2].power_cap_fraction or 1.0) == best


def test_a_job_that_refuses_caps_keeps_its_pair_at_full_power(models):
    marker = format_marker(GreenOptions(max_delay_s=6 * HOUR, accept_share=True, accept_cap=False,
                                        deadline=NOW + 6 * HOUR))
    plan = decide([job(1, "LM (batch size 20)"), replace(job(2, LIGHT), admin_comment=marker)], models)
    assert plan[2].share_with == 1
    assert plan[1].power_cap_fraction is None and plan[2].power_cap_fraction is None


def test_a_guest_of_a_running_host_takes_the_cap_its_token_carries(models):
    host = replace(job(1, LIGHT, state=JobState.RUNNING, node="n0", shards=2),
                   comment=decision_token.sign(b"k" * 16, 1, {"cap": 0.7}))
    plan = decide([host, job(2, LIGHT2)], models, free_nodes=0)
    assert plan[2].share_with == 1 and plan[2].power_cap_fraction == 0.7


@pytest.mark.parametrize(("cap", "shares"), [(0.4, False), (0.7, True)])
def test_a_guest_joins_a_running_host_only_if_the_hosts_cap_keeps_the_pair_within_the_bound(models, cap, shares):
    """LM beside ResNet-18 is within 1.25 at full power (1.20 x), not under a cap of 0.4 (1.47 x),
    which the host's token settles: the bound was checked at full power only."""
    host = replace(job(1, LIGHT, state=JobState.RUNNING, node="n0", shards=2),
                   comment=decision_token.sign(b"k" * 16, 1, {"cap": cap}))
    plan = decide([host, job(2, "LM (batch size 20)")], models, free_nodes=1, slowdown_bound=1.25)
    assert (plan[2].share_with == 1) is shares
    assert plan[2].expected_runtime_s <= 1.25 * HOUR


def test_both_jobs_of_a_pair_expect_to_run_as_long_as_sharing_and_the_cap_stretch_them(models):
    """A pair released together: each decision's expected run time is its time limit (its run
    alone, at full power) times its co-location slowdown over its rate at the pair's cap, so
    the planner raises both time limits (the host's too, which alone would not be slowed)."""
    pair = ("LM (batch size 20)", LIGHT)
    plan = decide([job(1, pair[0]), job(2, pair[1])], models)
    cap = plan[2].power_cap_fraction
    assert plan[2].share_with == 1 and cap is not None
    slow = models.colocated_slowdown(pair[1], pair[0], None, "timeslice")  # (guest, host)
    for job_id, job_type, slowdown in ((2, pair[1], slow[0]), (1, pair[0], slow[1])):
        model = models.for_job(job_type)
        rate = model.throughput(Config(1, 1, cap)) / model.throughput(Config(1))
        assert plan[job_id].expected_runtime_s == pytest.approx(HOUR * slowdown / rate)
        assert HOUR <= plan[job_id].expected_runtime_s <= 1.25 * HOUR  # within the bound
    assert plan[1].expected_runtime_s > HOUR  # the LM host is slowed (the light guest is not, here)


def test_the_planner_raises_the_hosts_time_limit_with_its_guests(models):
    """Submitted with --time 60 (the marker's limit=3600): the LM host, stretched by its light
    guest and the pair's cap, gets its limit raised before it starts, as a capped job does."""
    marker = format_marker(GreenOptions(max_delay_s=6 * HOUR, accept_share=True, deadline=NOW + 6 * HOUR,
                                        time_limit_s=HOUR))
    jobs = [replace(job(1, "LM (batch size 20)"), admin_comment=marker), replace(job(2, LIGHT), admin_comment=marker)]
    snap = ClusterSnapshot(taken_at=NOW, jobs=tuple(jobs), nodes=nodes(2))
    plan = EaCoPolicy()(context(snap, None, models))
    limits = {a.job_id: a.seconds for a in plan_actions(snap, plan, NOW) if isinstance(a, SetTimeLimit)}
    host = next(d for d in plan.decisions if d.job_id == 1)
    assert limits[1] == math.ceil(host.expected_runtime_s / 60) * 60 > HOUR



def test_a_guest_of_a_running_host_carries_the_hosts_stretch_and_the_planner_raises_its_limit(models):
    """The LM host runs on shards under its token's cap 0.7; the light guest slows it from now
    on by its co-location slowdown, over its rate at that cap relative to its limit as submitted."""
    marker = format_marker(GreenOptions(max_delay_s=6 * HOUR, accept_share=True, deadline=NOW + 6 * HOUR,
                                        time_limit_s=HOUR))
    lm = "LM (batch size 20)"
    host = replace(job(1, lm, state=JobState.RUNNING, node="n0", shards=2), admin_comment=marker,
                   comment=decision_token.sign(b"k" * 16, 1, {"cap": 0.7}))
    snap = ClusterSnapshot(taken_at=NOW, jobs=(host, job(2, LIGHT)), nodes=nodes(0))
    plan = EaCoPolicy()(context(snap, None, models))
    guest = next(d for d in plan.decisions if d.job_id == 2)
    model = models.for_job(lm)
    rate = model.throughput(Config(1, 1, 0.7)) / model.throughput(Config(1))
    slowed = models.colocated_slowdown(LIGHT, lm, None, "timeslice")[1]
    assert guest.share_with == 1 and guest.partner_stretch == pytest.approx(slowed / rate) and slowed > 1
    limits = [a for a in plan_actions(snap, plan, NOW) if isinstance(a, SetTimeLimit)]
    assert limits == [SetTimeLimit(1, math.ceil(HOUR * guest.partner_stretch / 60) * 60)]


def test_a_guest_of_a_host_starting_now_carries_no_stretch_the_host_decision_does(models):
    plan = decide([job(1, "LM (batch size 20)"), job(2, LIGHT)], models)
    assert plan[2].share_with == 1 and plan[2].partner_stretch is None
    assert plan[1].expected_runtime_s > HOUR


# --- within the partition's MaxTime -----------------------------------------------------

LIMITED = format_marker(GreenOptions(max_delay_s=6 * HOUR, accept_share=True, deadline=NOW + 6 * HOUR,
                                     time_limit_s=HOUR))


def within(jobs: list[Job], models, max_time_s: float, free_nodes: int):
    """EaCO's plan for ``jobs`` (submitted with --time 60 to partition gpu) under ``MaxTime``,
    and that plan as the planner would enact it."""
    jobs = [replace(j, admin_comment=LIMITED, partition="gpu") for j in jobs]
    snap = ClusterSnapshot(taken_at=NOW, jobs=tuple(jobs), nodes=nodes(free_nodes),
                           partitions=(Partition("gpu", max_time_s=max_time_s),))
    plan = EaCoPolicy()(context(snap, None, models))
    return {d.job_id: d for d in plan.decisions}, within_max_time(plan, snap) == plan


def test_no_pair_released_together_slows_its_host_past_max_time_and_the_planner_undoes_nothing(models):
    """The LM host is slowed by its light guest (about 1.1x): with MaxTime equal to the 60 minutes
    both asked for, the pair would be stopped there, so both start alone, as asked; with two
    hours the pair forms. Either way the planner has nothing to undo."""
    pair = [job(1, "LM (batch size 20)"), job(2, LIGHT)]
    tight, kept = within(pair, models, HOUR, free_nodes=2)
    assert tight[2].share_with is None and tight[1].nodes is None and kept
    assert "MaxTime" in tight[2].reason and tight[1].expected_runtime_s == tight[2].expected_runtime_s == HOUR
    loose, kept = within(pair, models, 2 * HOUR, free_nodes=2)
    assert loose[2].share_with == 1 and loose[1].expected_runtime_s > HOUR and kept


def test_a_guest_does_not_join_a_running_host_it_would_stretch_past_max_time(models):
    host = replace(job(1, "LM (batch size 20)", state=JobState.RUNNING, node="n0", shards=2),
                   comment=decision_token.sign(b"k" * 16, 1, {"cap": 0.7}))
    tight, kept = within([host, job(2, LIGHT)], models, HOUR, free_nodes=0)
    assert tight[2].share_with is None and tight[2].partner_stretch is None and kept
    loose, kept = within([host, job(2, LIGHT)], models, 2 * HOUR, free_nodes=0)
    assert loose[2].share_with == 1 and loose[2].partner_stretch > 1 and kept
