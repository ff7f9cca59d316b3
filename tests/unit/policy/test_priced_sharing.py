"""GreenFlow with co-location priced in its cost: a job it does not start now shares a GPU only
where that costs less than its plan, and only as EaCO's consent, bound and share rules allow."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_literals import HOUR, NOW, context, signal

from slurm_green.core.cluster import ClusterSnapshot, Job, JobState, Node, Partition
from slurm_green.core import decision_token
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.core.models import Config
from slurm_green.models.registry import default_registry
from slurm_green.policy.greenflow import GreenFlowPolicy, running_releases
from slurm_green.policy.priced_sharing import Colocation

LIGHT = "ResNet-18 (batch size 16)"
LIGHT2 = "Recommendation (batch size 512)"
HEAVY = "ResNet-50 (batch size 64)"  # two of them slow each other about 2.1x (Gavel, V100)


@pytest.fixture(scope="module")
def models():
    return default_registry()


def job(job_id: int, name: str, share: bool = True, running_for_h: float | None = None, shards: int = 0,
        node: str | None = None, runtime_h: float = 1.0, cap: bool = True) -> Job:
    marker = format_marker(GreenOptions(max_delay_s=6 * HOUR, accept_share=share, accept_cap=cap,
                                        deadline=NOW + 6 * HOUR))
    if running_for_h is None:
        return Job(job_id, name=name, submit_time=NOW - 100 + job_id, time_limit_s=runtime_h * HOUR,
                   gpus_per_node=1, admin_comment=marker)
    return Job(job_id, name=name, state=JobState.RUNNING, submit_time=NOW - 100 + job_id,
               time_limit_s=running_for_h * HOUR, gpus_per_node=0 if shards else 1, shards_per_node=shards,
               nodes=(node or "n0",), start_time=NOW - 50, end_time=NOW - 50 + running_for_h * HOUR,
               admin_comment=marker)


def one_gpu_node(busy: bool = True, shards: int = 1) -> Node:
    return Node("n0", gpus_total=1, gpus_allocated=int(busy), gpu_indices_allocated=(0,) if busy else (),
                shards_total=2, shards_allocated=shards if busy else 0)


def decide(jobs: list[Job], models, node_list: tuple[Node, ...], colocation: Colocation | None = Colocation(),
           **knobs):
    snap = ClusterSnapshot(taken_at=NOW, jobs=tuple(jobs), nodes=node_list)
    policy = GreenFlowPolicy(colocation=colocation, **knobs)
    return {d.job_id: d for d in policy(context(snap, signal([300.0] * 48), models)).decisions}


def test_a_queued_job_shares_a_running_shard_jobs_gpu_rather_than_wait_for_it(models):
    """The only GPU is held for 3 more hours by a light job on shards: a light job that would
    wait for it starts at once beside it (the pair slows neither by more than a few %)."""
    plan = decide([job(1, LIGHT, running_for_h=3, shards=1), job(2, LIGHT2)], models, (one_gpu_node(),))
    assert plan[2].share_with == 1
    assert plan[2].start_at == NOW and plan[2].nodes == ("n0",)
    assert "share the GPU of job 1 (running)" in plan[2].reason


def test_a_queued_job_shares_no_gpu_outside_its_partition(models):
    """The same pair as above, the guest submitted to a partition whose only node is busy: the
    host's GPU is not its partition's (``core.partitions``), so it waits there."""
    busy = Node("a0", gpus_total=1, gpus_allocated=1, gpu_indices_allocated=(0,))
    host, guest = job(1, LIGHT, running_for_h=3, shards=1), replace(job(2, LIGHT2), partition="a")
    snap = ClusterSnapshot(taken_at=NOW, jobs=(host, guest), nodes=(one_gpu_node(), busy),
                           partitions=(Partition("a", nodes=("a0",)), Partition("b", nodes=("n0",), default=True)))
    plan = {d.job_id: d for d in GreenFlowPolicy(colocation=Colocation())(
        context(snap, signal([300.0] * 48), models)).decisions}
    assert plan[2].share_with is None and not plan[2].nodes
    assert decide([host, replace(guest, partition="b")], models, (one_gpu_node(), busy))[2].share_with == 1


def test_a_guest_of_a_running_host_carries_how_much_longer_the_host_runs_beside_it(models):
    """What the planner raises the running host's time limit by: its co-location slowdown over
    its rate at the cap in force (its token's, 0.6 here)."""
    lm = "LM (batch size 20)"
    host = replace(job(1, lm, running_for_h=3, shards=1), comment=decision_token.sign(b"k" * 16, 1, {"cap": 0.6}))
    plan = decide([host, job(2, LIGHT)], models, (one_gpu_node(),))
    assert plan[2].share_with == 1
    model = models.for_job(lm)
    rate = model.throughput(Config(1, 1, 0.6)) / model.throughput(Config(1))
    slowed = models.colocated_slowdown(LIGHT, lm, None, "timeslice")[1]
    assert plan[2].partner_stretch == pytest.approx(slowed / rate) and plan[2].partner_stretch > 1


@pytest.mark.parametrize(("cap", "shares"), [(0.4, False), (0.7, True)])
def test_a_guest_joins_a_running_host_only_if_its_cap_keeps_the_pair_within_the_bound(models, cap, shares):
    """LM beside ResNet-18 is slowed 1.20 x, within 1.25; under the host's token cap of 0.4 it runs
    1.47 x as long, which sharing at once would still have priced below a 3-hour wait."""
    host = replace(job(1, LIGHT, running_for_h=3, shards=1), comment=decision_token.sign(b"k" * 16, 1, {"cap": cap}))
    plan = decide([host, job(2, "LM (batch size 20)")], models, (one_gpu_node(),))
    assert (plan[2].share_with == 1) is shares


def test_a_capped_pairs_energy_is_priced_at_its_power_and_time_under_the_cap(models):
    """A ResNet-18 (batch size 64) runs on shards under its token's cap 0.55 (131 W on a V100);
    another joins it for its hour. Both at the cap draw 91 W alone and slow each other by
    nothing, so unbounded the pair would draw 141 W: the decision's energy is the pair's power
    under the cap (docs/models.md) over the time together, which the clip stretches by its
    ratio of dynamic power (no time-sliced pair measured under a clip), less what the host
    alone would have drawn, as the simulator charges it. Priced unbounded, the energy was
    over-stated; priced bounded without the stretch, the clip saved energy nothing measured."""
    light, cap = "ResNet-18 (batch size 64)", 0.55
    host = replace(job(1, light, running_for_h=3, shards=1), comment=decision_token.sign(b"k" * 16, 1, {"cap": cap}))
    plan = decide([host, job(2, light)], models, (one_gpu_node(),))
    assert plan[2].share_with == 1 and plan[2].power_cap_fraction == cap
    board = models.type_params(None)[0].gpu
    model = models.for_job(light)
    rate = model.throughput(Config(1, 1, cap)) / model.throughput(Config(1))
    alone_w = model.power_w(Config(1, 1, cap))
    slow_g, slow_h = models.colocated_slowdown(light, light, None, "timeslice")  # a measured pair
    unbounded_w = board.idle_w + models.params.colocation_load["timeslice"].power_scale * (
        (alone_w - board.idle_w) / slow_g + (alone_w - board.idle_w) / slow_h)
    pair_w = min(unbounded_w, board.draw_ratio * cap * board.tdp_w)
    clip = (unbounded_w - board.idle_w) / (pair_w - board.idle_w)
    assert clip > 1.05  # the cap binds on this pair
    slow_g, slow_h = slow_g * clip, slow_h * clip
    together = HOUR / rate * slow_g  # the guest (its hour at the cap, slowed) ends first
    left = 3 * HOUR - 50  # the host's time to its limit at the cap: what it would draw alone
    host_alone_s = left - together / slow_h
    assert plan[2].expected_runtime_s == pytest.approx(together)
    expected_j = pair_w * together + alone_w * host_alone_s - alone_w * left
    assert plan[2].expected_energy_kwh == pytest.approx(expected_j / 3.6e6)


@pytest.mark.parametrize(("max_time_h", "shares"), [(3.0, False), (4.0, True)])
def test_no_guest_joins_a_running_host_it_would_stretch_past_its_max_time(models, max_time_h, shares):
    """The LM host was submitted with --time 3:00 and runs under cap 0.6: beside its guest it
    needs over 3 h, so with MaxTime 3 h Slurm would stop it and the guest waits instead."""
    marker = format_marker(GreenOptions(max_delay_s=6 * HOUR, accept_share=True, deadline=NOW + 6 * HOUR,
                                        time_limit_s=3 * HOUR))
    host = replace(job(1, "LM (batch size 20)", running_for_h=3, shards=1), partition="gpu", admin_comment=marker,
                   comment=decision_token.sign(b"k" * 16, 1, {"cap": 0.6}))
    snap = ClusterSnapshot(taken_at=NOW, jobs=(host, replace(job(2, LIGHT), partition="gpu")), nodes=(one_gpu_node(),),
                           partitions=(Partition("gpu", max_time_s=max_time_h * HOUR),))
    plan = {d.job_id: d for d in GreenFlowPolicy(colocation=Colocation())(
        context(snap, signal([300.0] * 48), models)).decisions}
    assert (plan[2].share_with == 1) is shares


def test_on_typed_nodes_a_host_that_asked_for_no_type_still_hosts(models):
    """The pool is the A40 nodes: a running shard job there runs on an A40, asked for or not."""
    node = replace(one_gpu_node(), gpu_type="a40")
    plan = decide([job(1, LIGHT, running_for_h=3, shards=1), job(2, LIGHT2)], models, (node,))
    assert plan[2].share_with == 1 and plan[2].gpu_type == "a40"


def test_without_colocation_the_same_job_waits(models):
    plan = decide([job(1, LIGHT, running_for_h=3, shards=1), job(2, LIGHT2)], models, (one_gpu_node(),),
                  colocation=None)
    assert plan[2].share_with is None


@pytest.mark.parametrize("host_share, guest_share", [(True, False), (False, True)])
def test_no_job_shares_unless_both_allow_it(models, host_share, guest_share):
    plan = decide([job(1, LIGHT, share=host_share, running_for_h=3, shards=1), job(2, LIGHT2, share=guest_share)],
                  models, (one_gpu_node(),))
    assert plan[2].share_with is None


def test_a_job_on_whole_gpus_hosts_nobody(models):
    """Slurm gives no shards of a GPU allocated whole (EaCO's rule, kept here)."""
    plan = decide([job(1, LIGHT, running_for_h=3), job(2, LIGHT2)], models, (one_gpu_node(shards=0),))
    assert plan[2].share_with is None


def test_a_slow_pair_is_priced_against_the_wait_it_saves(models):
    """Two heavy jobs slow each other about 2.1x: beyond EaCO's bound never; within a looser
    one, sharing pays against a long wait and not against a short one."""
    long_wait = [job(1, HEAVY, running_for_h=10, shards=1), job(2, HEAVY)]
    short_wait = [job(1, HEAVY, running_for_h=0.05, shards=1), job(2, HEAVY)]
    assert decide(long_wait, models, (one_gpu_node(),))[2].share_with is None
    loose = Colocation(slowdown_bound=2.5)
    assert decide(long_wait, models, (one_gpu_node(),), colocation=loose)[2].share_with == 1
    assert decide(short_wait, models, (one_gpu_node(),), colocation=loose)[2].share_with is None


def test_a_job_with_a_free_gpu_starts_alone(models):
    free = (one_gpu_node(), Node("n1", gpus_total=1, shards_total=2))
    plan = decide([job(1, LIGHT, running_for_h=3, shards=1), job(2, LIGHT2)], models, free)
    assert plan[2].share_with is None and plan[2].start_at == NOW


def test_a_queued_job_shares_the_gpu_of_a_job_starting_now_under_one_cap(models):
    """One free GPU, two light one-GPU jobs: the first starts on it, the second joins it
    rather than wait an hour; both decisions carry the pair's cap."""
    plan = decide([job(1, LIGHT), job(2, LIGHT2)], models, (one_gpu_node(busy=False),))
    assert plan[1].start_at == NOW and plan[1].share_with is None and plan[1].nodes == ("n0",)
    assert plan[2].share_with == 1 and plan[2].nodes == ("n0",)
    assert plan[2].power_cap_fraction == plan[1].power_cap_fraction
    # the host, slowed by its guest, expects a longer run than alone (its time limit follows),
    # within the pairing bound's stretch of its hour
    assert HOUR < plan[1].expected_runtime_s <= 1.25 * HOUR


def test_a_guest_refusing_caps_joins_no_capped_running_gpu(models):
    host = replace(job(1, LIGHT, running_for_h=3, shards=1), comment=decision_token.sign(b"k" * 16, 1, {"cap": 0.6}))
    plan = decide([host, job(2, LIGHT2, cap=False)], models, (one_gpu_node(),))
    assert plan[2].share_with is None
    uncapped = job(1, LIGHT, running_for_h=3, shards=1)
    plan = decide([uncapped, job(2, LIGHT2, cap=False)], models, (one_gpu_node(),))
    assert plan[2].share_with == 1 and plan[2].power_cap_fraction is None


def test_a_pairs_gpu_frees_when_the_later_of_its_two_jobs_ends():
    """Shard jobs hold one GPU per pair in the queue estimate, not one each and not none."""
    host = job(1, LIGHT, running_for_h=3, shards=1)
    guest = replace(job(2, LIGHT2, running_for_h=5, shards=1), comment=decision_token.sign(b"k" * 16, 2, {"share": 1}))
    alone = job(3, LIGHT, running_for_h=1, shards=1, node="n1")
    snap = ClusterSnapshot(taken_at=NOW, jobs=(host, guest, alone), nodes=(one_gpu_node(),))
    assert running_releases(snap, NOW) == [(pytest.approx(HOUR - 50), 1), (pytest.approx(5 * HOUR - 50), 1)]


TYPES = (LIGHT, LIGHT2, HEAVY, "LM (batch size 20)", "Transformer (batch size 32)")


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TYPES), st.booleans(), st.booleans(), st.booleans(),
                          st.sampled_from((0.5, 2.0, 8.0))), min_size=1, max_size=10),
       st.integers(0, 3), st.sampled_from((1.1, 1.25, 2.5)))
def test_consent_bound_one_guest_per_gpu_and_one_cap_hold_on_random_queues(models, rows, free, bound):
    """One-GPU nodes n0..n5: the first rows that run take them (on shards from n3 on), the others
    wait, and ``free`` more nodes stand empty. Every pair has both consents, a host on shards or
    starting now, both slowdowns within the bound, one guest per GPU, the guest started now on
    the host's node, and one cap (none where the guest refuses caps)."""
    jobs, node_list = [], []
    for i, (name, share, cap, running, hours) in enumerate(rows, start=1):
        if running and len(node_list) < 6:
            shards = 1 if len(node_list) >= 3 else 0
            node = f"n{len(node_list)}"
            node_list.append(Node(node, gpus_total=1, gpus_allocated=1, gpu_indices_allocated=(0,), shards_total=2,
                                  shards_allocated=shards))
            jobs.append(job(i, name, share=share, cap=cap, running_for_h=hours, shards=shards, node=node))
        else:
            jobs.append(job(i, name, share=share, cap=cap, runtime_h=hours))
    node_list += [Node(f"f{k}", gpus_total=1, shards_total=2) for k in range(free)]
    plan = decide(jobs, models, tuple(node_list), colocation=Colocation(slowdown_bound=bound))
    by_id = {j.job_id: j for j in jobs}
    guests_of: dict[int, int] = {}
    for d in plan.values():
        if d.share_with is None:
            continue
        guest, host = by_id[d.job_id], by_id[d.share_with]
        assert guest.is_pending and "share=1" in guest.admin_comment and "share=1" in host.admin_comment
        assert host.shards_per_node if not host.is_pending else plan[host.job_id].share_with is None
        assert max(models.colocated_slowdown(guest.name, host.name, None)) <= bound
        assert d.start_at == NOW and d.nodes == (host.nodes if not host.is_pending else plan[host.job_id].nodes)
        if host.is_pending:
            assert plan[host.job_id].start_at == NOW
            host_cap = plan[host.job_id].power_cap_fraction
            assert d.power_cap_fraction == host_cap or "cap=0" in guest.admin_comment
        if "cap=0" in guest.admin_comment:
            assert d.power_cap_fraction is None
        guests_of[host.job_id] = guests_of.get(host.job_id, 0) + 1
    assert all(n == 1 for n in guests_of.values())
