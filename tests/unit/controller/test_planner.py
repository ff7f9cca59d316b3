import dataclasses

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_green.controller.planner import START_TOLERANCE_S, colocate, enactable, plan_actions, sharing_allowed
from slurm_green.core import decision_token as dt
from slurm_green.core.actions import SetDecision, SetGpuFreq, SetGpus, SetNodes, SetStartTime, SetTimeLimit, ShareGpus
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState, Node, Partition, Reservation
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.core.decision import DecisionMemo
from slurm_green.core.plan import JobDecision, Plan

KEY = b"s" * 32
NOW = 1_700_000_000.0
SHARING = format_marker(GreenOptions(max_delay_s=3600, accept_share=True))
ALONE = format_marker(GreenOptions(max_delay_s=3600, accept_share=False))


def sign(job_id, payload):
    return dt.sign(KEY, job_id, payload)


def verify(job_id, token):
    return dt.verify(KEY, job_id, token)


def snapshot(*jobs, version="24.11.5"):
    return ClusterSnapshot(taken_at=NOW, slurm_version=version, jobs=jobs)


def test_deferral_comes_after_token_and_gpu_change():
    job = Job(7, gpus_per_node=2, comment="green:flex=6h", eligible_time=NOW + 6 * 3600)
    plan = Plan((JobDecision(7, start_at=NOW + 3600, gpus_per_node=4, power_cap_fraction=0.7),))
    actions = plan_actions(snapshot(job), plan, NOW, sign, verify)
    assert [type(a) for a in actions] == [SetDecision, SetGpus, SetStartTime]
    assert actions[2] == SetStartTime(7, NOW + 3600)
    # the bare token: the backend writes it beside the user's words (commands.plan)
    assert dt.verify(KEY, 7, actions[0].token) == {"cap": 0.7}


def test_decision_already_in_force_gives_no_action():
    token = sign(7, {"cap": 0.7})
    job = Job(7, gpus_per_node=4, comment=f"green:flex=6h {token}", eligible_time=NOW + 3600 + START_TOLERANCE_S / 2)
    plan = Plan((JobDecision(7, start_at=NOW + 3600, gpus_per_node=4, power_cap_fraction=0.7),))
    assert plan_actions(snapshot(job), plan, NOW, sign, verify) == []


def test_forged_token_is_replaced():
    forged = dt.sign(b"f" * 32, 7, {"cap": 1.0})
    job = Job(7, comment=forged, eligible_time=NOW)
    plan = Plan((JobDecision(7, start_at=NOW, power_cap_fraction=0.6),))
    (action,) = plan_actions(snapshot(job), plan, NOW, sign, verify)
    assert isinstance(action, SetDecision)
    assert dt.verify(KEY, 7, action.token) == {"cap": 0.6}


def test_release_now_of_a_deferred_job():
    job = Job(3, eligible_time=NOW + 7200)
    (action,) = plan_actions(snapshot(job), Plan((JobDecision(3, start_at=None),)), NOW)
    assert action == SetStartTime(3, NOW)


def test_past_start_is_clamped_to_now_and_eligible_job_left_alone():
    job = Job(3, eligible_time=NOW - 10)
    assert plan_actions(snapshot(job), Plan((JobDecision(3, start_at=NOW - 500),)), NOW) == []


def test_jobs_no_longer_pending_or_gone_are_skipped():
    running = Job(1, state=JobState.RUNNING, eligible_time=NOW)
    plan = Plan((JobDecision(1, start_at=NOW + 3600), JobDecision(99, start_at=NOW + 3600)))
    assert plan_actions(snapshot(running), plan, NOW) == []


def test_placement_and_node_count():
    job = Job(5, gpus_per_node=4, num_nodes=1, eligible_time=NOW)
    plan = Plan((JobDecision(5, num_nodes=2, nodes=("node1", "node2")),))
    actions = plan_actions(snapshot(job), plan, NOW)
    assert actions == [SetGpus(5, 4, 2), SetNodes(5, ("node1", "node2"))]


def test_no_token_without_a_signer():
    job = Job(5, eligible_time=NOW)
    assert plan_actions(snapshot(job), Plan((JobDecision(5, power_cap_fraction=0.5),)), NOW) == []


def test_gpu_freq_sites_get_the_cap_as_tres_freq_and_no_cap_in_the_token():
    job = Job(7, gpus_per_node=1, comment="green:flex=6h", eligible_time=NOW)
    partner = Job(3, state=JobState.RUNNING, shards_per_node=2, nodes=("node1",), admin_comment=SHARING,
                  comment=sign(3, {"cap": 0.7}))
    job = dataclasses.replace(job, admin_comment=SHARING, gpus_per_node=0, shards_per_node=2, nodes=("node1",))
    plan = Plan((JobDecision(7, start_at=NOW, power_cap_fraction=0.7, share_with=3),))
    actions = plan_actions(snapshot(job, partner), plan, NOW, sign, verify, enact="gpu_freq")
    assert [type(a) for a in actions] == [SetDecision, SetGpuFreq]
    assert dt.verify(KEY, 7, actions[0].token) == {"share": 3}
    assert actions[1] == SetGpuFreq(7, "gpu:medium")
    in_force = dataclasses.replace(job, comment=f"green:flex=6h {actions[0].token}", tres_freq="gpu:medium")
    assert plan_actions(snapshot(in_force, partner), plan, NOW, sign, verify, enact="gpu_freq") == []


def test_greenflows_resize_pin_and_release_of_an_elastic_job():
    job = Job(5, gpus_per_node=1, num_nodes=1, eligible_time=NOW + 1200)  # held to its deadline by the plugin
    plan = Plan((JobDecision(5, start_at=NOW, gpus_per_node=4, num_nodes=2, nodes=("node2", "node1")),))
    assert plan_actions(snapshot(job), plan, NOW) == [SetGpus(5, 4, 2), SetNodes(5, ("node2", "node1")),
                                                      SetStartTime(5, NOW)]


def test_a_pin_in_force_is_not_sent_again_whatever_the_order():
    job = Job(5, gpus_per_node=4, num_nodes=2, nodes=("node1", "node2"), eligible_time=NOW)
    plan = Plan((JobDecision(5, start_at=NOW, gpus_per_node=4, num_nodes=2, nodes=("node2", "node1")),))
    assert plan_actions(snapshot(job), plan, NOW) == []


def test_a_node_list_always_travels_with_its_node_count():
    """Slurm keeps ReqNodeList=node1,node2 beside NumNodes=1: a job that cannot start as decided."""
    job = Job(5, gpus_per_node=2, num_nodes=1, eligible_time=NOW)
    plan = Plan((JobDecision(5, nodes=("node1", "node2")),))
    assert plan_actions(snapshot(job), plan, NOW) == [SetGpus(5, 2, 2), SetNodes(5, ("node1", "node2"))]


def test_an_empty_node_list_clears_a_pin_and_none_leaves_it():
    pinned = Job(5, gpus_per_node=2, nodes=("node3",), eligible_time=NOW)
    assert plan_actions(snapshot(pinned), Plan((JobDecision(5, nodes=()),)), NOW) == [SetNodes(5, ())]
    assert plan_actions(snapshot(pinned), Plan((JobDecision(5),)), NOW) == []
    free = Job(6, gpus_per_node=2, eligible_time=NOW)
    assert plan_actions(snapshot(free), Plan((JobDecision(6, nodes=()),)), NOW) == []


# -- where the user chose the nodes -------------------------------------------------------

OWN_NODES = format_marker(GreenOptions(max_delay_s=3600, accept_share=True, own_nodes=True))


def test_a_job_whose_user_chose_its_nodes_keeps_them_and_its_size_but_not_its_deadline():
    """``-w``/``-x``/``-C`` at submission (the marker's own_nodes): no pin, no pin cleared, no size,
    whatever the policy decided; the start and the cap are enacted. Another job is decided as before."""
    own = Job(5, gpus_per_node=1, nodes=("node3",), eligible_time=NOW + 1200, admin_comment=OWN_NODES)
    other = Job(6, gpus_per_node=1, eligible_time=NOW + 1200, admin_comment=SHARING)
    plan = Plan((JobDecision(5, start_at=NOW, gpus_per_node=4, num_nodes=2, nodes=("node1", "node2"),
                             power_cap_fraction=0.6, reason="start now"),
                 JobDecision(6, start_at=NOW, gpus_per_node=2, num_nodes=1, nodes=("node4",))))
    actions = plan_actions(snapshot(own, other), plan, NOW, sign, verify)
    assert [a for a in actions if a.job_id == 5 and not isinstance(a, SetDecision)] == [SetStartTime(5, NOW)]
    [token] = [a for a in actions if a.job_id == 5 and isinstance(a, SetDecision)]
    assert dt.verify(KEY, 5, token.token) == {"cap": 0.6}
    assert [a for a in actions if a.job_id == 6] == [SetGpus(6, 2, None), SetNodes(6, ("node4",)), SetStartTime(6, NOW)]
    cleared = Plan((JobDecision(5, start_at=NOW, nodes=()),))  # "not placed now": its node list stays the user's
    assert plan_actions(snapshot(own), cleared, NOW) == [SetStartTime(5, NOW)]
    kept, _ = enactable(plan, snapshot(own, other))
    assert "its user chose its nodes" in kept.decisions[0].reason
    assert (kept.decisions[0].nodes, kept.decisions[0].gpus_per_node, kept.decisions[0].num_nodes) == (None,) * 3


def test_a_job_in_a_reservation_starts_as_slurm_schedules_it_with_its_decided_cap():
    """A pending job Slurm runs in a reservation (``Job.reservation``) gets no decided start: one
    job_submit.lua deferred is released, a deferral decided for it is dropped, its cap stays.
    A job in no reservation is deferred as decided."""
    later = NOW + 3600
    reserved = Job(5, gpus_per_node=1, eligible_time=NOW + 1200, admin_comment=OWN_NODES, reservation="r1")
    other = Job(6, gpus_per_node=1, eligible_time=NOW + 1200, admin_comment=SHARING)
    plan = Plan((JobDecision(5, start_at=later, power_cap_fraction=0.6, reason="a cleaner hour"),
                 JobDecision(6, start_at=later, reason="a cleaner hour")))
    actions = plan_actions(snapshot(reserved, other), plan, NOW, sign, verify)
    assert [a for a in actions if not isinstance(a, SetDecision)] == [SetStartTime(5, NOW), SetStartTime(6, later)]
    [token] = [a for a in actions if isinstance(a, SetDecision)]
    assert (token.job_id, dt.verify(KEY, 5, token.token)) == (5, {"cap": 0.6})
    kept, _ = enactable(plan, snapshot(reserved, other))
    assert kept.decisions[0].start_at is None and "in reservation r1" in kept.decisions[0].reason
    assert kept.decisions[1] == plan.decisions[1]
    started = dataclasses.replace(reserved, eligible_time=NOW - 60)  # already eligible: nothing to send
    assert plan_actions(snapshot(started), Plan((plan.decisions[0],)), NOW) == []


def test_a_job_slurm_holds_for_a_site_limit_at_a_decided_size_goes_back_to_its_own():
    """Tick 1 grows a 1-GPU job to 4 on node1; tick 2 finds Slurm holding it for a QOS limit
    (``QOSMaxGRESPerUser``): it goes back to 1 GPU, uncapped, unpinned, and stays there while it
    waits, whatever the policy says (tick 3); another resized job, waiting for resources, is
    resized as decided."""
    memo = DecisionMemo()
    grow = JobDecision(7, start_at=NOW, gpus_per_node=4, num_nodes=1, nodes=("node1",), power_cap_fraction=0.5,
                       expected_runtime_s=1800.0, reason="start now")
    other = JobDecision(8, start_at=NOW, gpus_per_node=2, num_nodes=1, reason="start now")
    asked = Job(7, gpus_per_node=1, admin_comment=SHARING, state_reason="BeginTime", time_limit_s=3600.0)
    waiting = Job(8, gpus_per_node=1, admin_comment=SHARING, state_reason="Resources", time_limit_s=3600.0)
    first, _ = enactable(Plan((grow, other)), snapshot(asked, waiting), memo=memo)
    assert first.decisions == (grow, other)
    for reason in ("QOSMaxGRESPerUser", "Resources"):  # held at 4; then waiting at 1, its size kept
        size = 4 if reason.startswith("QOS") else 1
        now = dataclasses.replace(asked, gpus_per_node=size, nodes=("node1",) if size == 4 else (),
                                  state_reason=reason)
        grown = dataclasses.replace(waiting, gpus_per_node=2)
        kept, _ = enactable(Plan((grow, other)), snapshot(now, grown), memo=memo)
        back = kept.decisions[0]
        own = 1 if size == 4 else None  # None: the size it has
        assert (back.gpus_per_node, back.num_nodes, back.power_cap_fraction, back.expected_runtime_s) == (own, own, None, None)
        assert back.nodes == (() if size == 4 else None)
        assert "site limit (QOSMaxGRESPerUser) at 4 GPU(s)" in back.reason, back.reason
        assert kept.decisions[1] == other
        actions = plan_actions(snapshot(now, grown), Plan((grow, other)), NOW, sign, verify, memo=memo)
        assert (SetGpus(7, 1, None) in actions, SetNodes(7, ()) in actions) == (size == 4, size == 4), actions
        assert not any(isinstance(a, SetGpus) and a.job_id == 8 for a in actions)  # 2 already


def test_a_site_limit_on_a_job_never_resized_changes_nothing():
    """A job at its own size that a limit holds (its user's other jobs use the QOS's GPUs) waits
    as under Slurm alone: the controller's decision stands."""
    memo = DecisionMemo()
    same = JobDecision(7, start_at=NOW, power_cap_fraction=0.5, reason="start now")
    job = Job(7, gpus_per_node=1, admin_comment=SHARING, state_reason="QOSMaxGRESPerUser")
    for _ in range(2):
        kept, _ = enactable(Plan((same,)), snapshot(job), memo=memo)
        assert kept.decisions == (same,)


def test_a_pending_array_keeps_its_shape_one_pin_would_bind_every_task():
    array = Job(5, gpus_per_node=1, eligible_time=NOW + 1200,
                admin_comment=format_marker(GreenOptions(max_delay_s=3600, gpus_min=1, gpus_max=4, array=True)))
    plan = Plan((JobDecision(5, start_at=NOW, gpus_per_node=2, num_nodes=1, nodes=("node3",), reason="start now"),))
    assert plan_actions(snapshot(array), plan, NOW) == [SetStartTime(5, NOW)]
    kept, _ = enactable(plan, snapshot(array))
    assert "an array" in kept.decisions[0].reason


def test_no_job_shares_a_gpu_with_a_pending_job_whose_user_chose_its_nodes():
    plan = Plan((JobDecision(1, start_at=NOW, nodes=("node3",), share_with=2, power_cap_fraction=0.5),
                 JobDecision(2, start_at=NOW, share_with=1, power_cap_fraction=0.8)))
    actions = plan_actions(snapshot(pending(1), pending(2, marker=OWN_NODES)), plan, NOW, sign, verify)
    assert not any(isinstance(a, (ShareGpus, SetNodes)) for a in actions), actions
    # running, such a job is no one's to move: a pending job may still join it on its node
    partner = dataclasses.replace(running_on_shards(1, comment=sign(1, {"cap": 0.6})), admin_comment=OWN_NODES)
    joined = Plan((JobDecision(2, start_at=NOW, power_cap_fraction=0.6, share_with=1),))
    assert ShareGpus(2, 1) in plan_actions(snapshot(pending(2), partner), joined, NOW, sign, verify)


# -- what the job's partition can hold ----------------------------------------------------

PARTITIONED = (Node("a1", gpus_total=8), Node("b1", gpus_total=4), Node("b2", gpus_total=4))
PARTITIONS = (Partition("a", nodes=("a1",)), Partition("b", nodes=("b1", "b2"), default=True))


def partitioned(job: Job, decision: JobDecision) -> list:
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,), nodes=PARTITIONED,
                           partitions=PARTITIONS)
    return plan_actions(snap, Plan((decision,)), NOW, sign, verify)


@pytest.mark.parametrize("partition", ["b", "", "b,c"])  # by name, the default one, a list naming it
def test_no_job_is_pinned_outside_its_partition_nor_given_more_gpus_per_node_than_it_holds(partition):
    """Slurm refuses either update, and the job's start waits for it: until its deadline."""
    job = Job(7, partition=partition, gpus_per_node=2, eligible_time=NOW + 3600, admin_comment=ALONE)
    assert partitioned(job, JobDecision(7, start_at=NOW, nodes=("a1",))) == [SetStartTime(7, NOW)]
    assert partitioned(job, JobDecision(7, start_at=NOW, gpus_per_node=8, num_nodes=1)) == [SetStartTime(7, NOW)]
    pinned = dataclasses.replace(job, nodes=("a1",))  # an earlier tick's wrong pin is cleared
    assert partitioned(pinned, JobDecision(7, start_at=NOW, nodes=("a1",))) == [SetNodes(7, ()), SetStartTime(7, NOW)]
    # within it, the decision stands
    assert partitioned(job, JobDecision(7, start_at=NOW, gpus_per_node=4, nodes=("b2",))) == [
        SetGpus(7, 4, None), SetNodes(7, ("b2",)), SetStartTime(7, NOW)]


def test_a_job_is_given_no_more_nodes_than_the_tasks_its_user_gave():
    """``-n 1`` (the marker's tasks=1): 2 nodes is dropped, the size stays as submitted; with
    ``-n 4``, or no ``-n``, 2 nodes stand."""
    for tasks, spread in ((1, False), (4, True), (None, True)):
        marker = format_marker(GreenOptions(max_delay_s=3600, gpus_min=1, gpus_max=8, tasks=tasks))
        job = Job(7, partition="b", gpus_per_node=4, eligible_time=NOW + 3600, admin_comment=marker)
        actions = partitioned(job, JobDecision(7, start_at=NOW, gpus_per_node=4, num_nodes=2, nodes=("b1", "b2")))
        assert (SetGpus(7, 4, 2) in actions) == spread, (tasks, actions)


def test_a_job_that_asked_for_no_whole_gpu_is_given_none():
    """A CPU job, or one on shards of a GPU, marked by job_submit.lua like any other."""
    for job in (Job(7, partition="b", eligible_time=NOW + 3600, admin_comment=ALONE),
                Job(7, partition="b", shards_per_node=2, eligible_time=NOW + 3600, admin_comment=ALONE)):
        assert partitioned(job, JobDecision(7, start_at=NOW, gpus_per_node=1, num_nodes=1)) == [SetStartTime(7, NOW)]


def test_no_job_starting_now_is_pinned_to_a_node_whose_cpus_other_jobs_hold():
    """Seen on 24.11: GreenFlow pinned a 1-GPU job to node3 while a CPU job held all 64 of its
    CPUs, and the job waited (Reason=Resources) with other nodes idle. Without the pin Slurm
    places it; its size and start stand. Pins in the same plan count against each other."""
    busy = (Node("b1", gpus_total=4, cpus_total=64, cpus_allocated=64), Node("b2", gpus_total=4, cpus_total=64,
                                                                              cpus_allocated=40))
    jobs = [Job(i, partition="b", gpus_per_node=1, cpus=16, eligible_time=NOW + 3600, admin_comment=ALONE)
            for i in (7, 8)]
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=tuple(jobs), nodes=busy, partitions=PARTITIONS)

    def pins(*decisions):
        kept, _ = enactable(Plan(decisions), snap, verify)
        return [(d.nodes, d.gpus_per_node) for d in kept.decisions]

    assert pins(JobDecision(7, start_at=NOW, gpus_per_node=2, nodes=("b1",))) == [(None, 2)]
    assert pins(JobDecision(7, start_at=NOW, nodes=("b2",)), JobDecision(8, start_at=NOW, nodes=("b2",))) == [
        (("b2",), None), (None, None)]  # 24 free: the first takes 16, the second does not fit
    later = JobDecision(7, start_at=NOW + 3 * START_TOLERANCE_S, nodes=("b1",))
    assert pins(later) == [(("b1",), None)]  # CPUs then are not known
    unknown = dataclasses.replace(snap, nodes=tuple(dataclasses.replace(n, cpus_total=0) for n in busy))
    assert enactable(Plan((JobDecision(7, start_at=NOW, nodes=("b1",)),)), unknown, verify)[0].decisions[0].nodes == ("b1",)


def test_a_pin_is_checked_for_the_cpus_a_job_asking_them_per_gpu_needs_at_its_decided_size():
    """16 CPUs a GPU: on b2 (24 free) 1 GPU fits, the 2 decided need 32."""
    busy = (Node("b1", gpus_total=4, cpus_total=64, cpus_allocated=64), Node("b2", gpus_total=4, cpus_total=64,
                                                                              cpus_allocated=40))
    job = Job(7, partition="b", gpus_per_node=1, cpus=16, cpus_per_gpu=16, eligible_time=NOW + 3600,
              admin_comment=ALONE)
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,), nodes=busy, partitions=PARTITIONS)
    for gpus, kept_pin in ((1, True), (2, False)):
        decided = enactable(Plan((JobDecision(7, start_at=NOW, gpus_per_node=gpus, nodes=("b2",)),)), snap,
                            verify)[0].decisions[0]
        assert (decided.nodes == ("b2",)) == kept_pin, decided.reason
    assert "b2 lacks its 32 CPU(s) free" in decided.reason


def test_no_job_starting_now_is_pinned_to_a_node_whose_memory_other_jobs_hold():
    """As with CPUs: where memory is consumable (``CR_Core_Memory``) one job holding a node's
    memory leaves its GPUs and CPUs free and starts nothing there. A job or node whose memory is
    not known is not checked."""
    full = (Node("b1", gpus_total=4, cpus_total=64, memory_total_mib=512000, memory_allocated_mib=510000),
            Node("b2", gpus_total=4, cpus_total=64, memory_total_mib=512000, memory_allocated_mib=500000))
    jobs = [Job(i, partition="b", gpus_per_node=1, cpus=1, memory_mib=8000, num_nodes=1, eligible_time=NOW + 3600,
                admin_comment=ALONE) for i in (7, 8)]
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=tuple(jobs), nodes=full, partitions=PARTITIONS)

    def pins(snapshot, *decisions):
        kept, _ = enactable(Plan(decisions), snapshot, verify)
        return [d.nodes for d in kept.decisions]

    dropped = enactable(Plan((JobDecision(7, start_at=NOW, nodes=("b1",)),)), snap, verify)[0].decisions[0]
    assert dropped.nodes is None and "b1 lacks its 8000 MiB of memory free" in dropped.reason
    assert pins(snap, JobDecision(7, start_at=NOW, nodes=("b2",)), JobDecision(8, start_at=NOW, nodes=("b2",))) == [
        ("b2",), None]  # 12000 MiB free: the first takes 8000, the second does not fit
    no_memory = dataclasses.replace(snap, jobs=tuple(dataclasses.replace(j, memory_mib=0) for j in jobs))
    assert pins(no_memory, JobDecision(7, start_at=NOW, nodes=("b1",))) == [("b1",)]
    unknown = dataclasses.replace(snap, nodes=tuple(dataclasses.replace(n, memory_total_mib=0) for n in full))
    assert pins(unknown, JobDecision(7, start_at=NOW, nodes=("b1",))) == [("b1",)]


def test_no_two_jobs_are_pinned_to_one_node_where_one_takes_it_whole():
    """On a partition with ``OverSubscribe=EXCLUSIVE`` a job takes its node whole: seen on 24.11, GreenFlow pinned three 1-GPU jobs
    to node1, one ran and two waited (``Resources``) with three nodes idle. The first keeps its
    pin; the others are unpinned and Slurm places them; a job taking its node whole is not
    pinned where anything runs. Elsewhere two jobs share a node as before."""
    idle = tuple(Node(f"n{i}", gpus_total=4, cpus_total=64) for i in (1, 2))
    used = (dataclasses.replace(idle[0], gpus_allocated=1, cpus_allocated=1), idle[1])

    def pins(nodes, exclusive_partition, *jobs):
        partitions = (Partition("p", nodes=("n1", "n2"), default=True, exclusive=exclusive_partition),)
        pending = tuple(Job(j, gpus_per_node=1, cpus=1, eligible_time=NOW + 3600, admin_comment=ALONE) for j in jobs)
        snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=pending, nodes=nodes, partitions=partitions)
        plan = Plan(tuple(JobDecision(j, start_at=NOW, nodes=("n1",)) for j in jobs))
        return [d.nodes for d in enactable(plan, snap, verify)[0].decisions]

    assert pins(idle, True, 7, 8, 9) == [("n1",), None, None]
    assert pins(used, True, 7) == [None]  # n1 runs a job
    assert pins(idle, False, 7, 8, 9) == [("n1",)] * 3  # 4 GPUs and 64 CPUs: all three fit
    assert pins(used, False, 7) == [("n1",)]


def test_no_job_that_asked_its_gpus_per_job_or_task_is_resized_or_shared():
    """``--gpus=1``: Slurm refuses ``Gres=`` (``Invalid generic resource (gres) specification``,
    24.11) and the job's start with it, so it would wait until its deadline; ``--gpus-per-task=1``:
    Slurm takes it by raising the job's task count. Its pin and start stand."""
    job = Job(7, partition="b", gpus_per_node=1, eligible_time=NOW + 3600, admin_comment=ALONE,
              gpus_per_node_only=False)
    grown = JobDecision(7, start_at=NOW, gpus_per_node=2, num_nodes=1, nodes=("b2",))
    assert partitioned(job, grown) == [SetNodes(7, ("b2",)), SetStartTime(7, NOW)]
    plan = Plan((JobDecision(1, start_at=NOW, nodes=("node3",), share_with=2, power_cap_fraction=0.5),
                 JobDecision(2, start_at=NOW, share_with=1, power_cap_fraction=0.8)))
    per_job = dataclasses.replace(pending(2), gpus_per_node_only=False)
    assert not any(isinstance(a, ShareGpus) for a in plan_actions(snapshot(pending(1), per_job), plan, NOW, sign, verify))
    assert any(isinstance(a, ShareGpus) for a in plan_actions(snapshot(pending(1), pending(2)), plan, NOW, sign, verify))


def test_no_job_is_given_more_nodes_than_its_partitions_maxnodes():
    """Slurm takes the update and leaves the job pending (``Reason=PartitionNodeLimit``) until
    someone shrinks it: the size goes, with the pin that went with it; the start stays."""
    job = Job(7, partition="b", gpus_per_node=2, eligible_time=NOW + 3600, admin_comment=ALONE)
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,), nodes=PARTITIONED,
                           partitions=(PARTITIONS[0], dataclasses.replace(PARTITIONS[1], max_nodes=1)))
    for wide in (JobDecision(7, start_at=NOW, gpus_per_node=4, num_nodes=2, nodes=("b1", "b2")),
                 JobDecision(7, start_at=NOW, nodes=("b1", "b2"))):
        kept, _ = enactable(Plan((wide,)), snap, verify)
        assert kept.decisions[0].nodes is None and kept.decisions[0].num_nodes is None, kept
        assert "MaxNodes" in kept.decisions[0].reason
        assert plan_actions(snap, Plan((wide,)), NOW, sign, verify) == [SetStartTime(7, NOW)]
    one = Plan((JobDecision(7, start_at=NOW, gpus_per_node=4, num_nodes=1, nodes=("b2",)),))
    assert enactable(one, snap, verify)[0] == one
    # a job that asked for two nodes itself keeps what it asked (not the planner's to refuse)
    two = dataclasses.replace(job, num_nodes=2)
    same = Plan((JobDecision(7, start_at=NOW, gpus_per_node=4, num_nodes=2),))
    assert enactable(same, dataclasses.replace(snap, jobs=(two,)), verify)[0] == same


@pytest.mark.parametrize("listed", [(), ("ALL",), ("a1", "gone")])  # none, as printed for Nodes=ALL, unknown
def test_a_partition_whose_node_list_is_not_known_holds_every_node(listed):
    job = Job(7, partition="c", gpus_per_node=2, eligible_time=NOW + 3600, admin_comment=ALONE)
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,), nodes=PARTITIONED,
                           partitions=(Partition("c", nodes=listed),))
    plan = Plan((JobDecision(7, start_at=NOW, gpus_per_node=8, nodes=("a1",)),))
    assert enactable(plan, snap, verify)[0] == plan


# -- the GPU type the job asked for -------------------------------------------------------

# h100 nodes 4 wide, an a40 node and an untyped one 8 wide; partition "a" has no h100 node;
# "c" names a node the snapshot lacks (taken as every node).
TYPED = (Node("h1", gpus_total=4, gpu_type="h100"), Node("h2", gpus_total=4, gpu_type="h100"),
         Node("a1", gpus_total=8, gpu_type="a40"), Node("u1", gpus_total=8))
TYPED_PARTITIONS = (Partition("gpu", nodes=("h1", "h2", "a1", "u1"), default=True), Partition("a", nodes=("a1", "u1")),
                    Partition("c", nodes=("ALL",)))


def typed(job: Job, decision: JobDecision, nodes: tuple[Node, ...] = TYPED) -> list:
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,), nodes=nodes,
                           partitions=TYPED_PARTITIONS)
    return plan_actions(snap, Plan((decision,)), NOW, sign, verify)


@pytest.mark.parametrize("partition", ["gpu", "", "c"])  # by name, the default one, one of every node
def test_a_job_that_asked_for_a_gpu_type_is_pinned_only_to_nodes_of_that_type(partition):
    """Slurm's gpu:h100 matches no node of another type nor an untyped one: the pin is refused."""
    job = Job(7, partition=partition, gpus_per_node=2, gpu_type="h100", eligible_time=NOW + 3600, admin_comment=ALONE)
    for other in (("a1",), ("u1",), ("h1", "a1")):
        assert typed(job, JobDecision(7, start_at=NOW, nodes=other)) == [SetStartTime(7, NOW)]
    pinned = dataclasses.replace(job, nodes=("a1",))  # an earlier tick's wrong pin is cleared
    assert typed(pinned, JobDecision(7, start_at=NOW, nodes=("a1",))) == [SetNodes(7, ()), SetStartTime(7, NOW)]
    assert typed(job, JobDecision(7, start_at=NOW, nodes=("h2",))) == [SetNodes(7, ("h2",)), SetStartTime(7, NOW)]


def test_a_job_that_asked_for_a_gpu_type_gets_no_more_gpus_per_node_than_its_types_widest_node():
    job = Job(7, partition="gpu", gpus_per_node=2, gpu_type="h100", eligible_time=NOW + 3600, admin_comment=ALONE)
    assert typed(job, JobDecision(7, start_at=NOW, gpus_per_node=8, num_nodes=1)) == [SetStartTime(7, NOW)]
    assert typed(job, JobDecision(7, start_at=NOW, gpus_per_node=4, nodes=("h1",))) == [
        SetGpus(7, 4, None), SetNodes(7, ("h1",)), SetStartTime(7, NOW)]


@pytest.mark.parametrize("partition,kind", [("gpu", "b200"), ("a", "h100")])  # in no node, in none of its partition
def test_a_job_that_asked_for_a_type_no_node_of_its_partition_has_keeps_its_size_and_no_pin(partition, kind):
    """A policy plans it for the cluster's majority type; it starts when decided, capped, as asked."""
    job = Job(7, partition=partition, gpus_per_node=2, gpu_type=kind, eligible_time=NOW + 3600, admin_comment=ALONE,
              nodes=("h1",))
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,), nodes=TYPED,
                           partitions=TYPED_PARTITIONS)
    for decided in (JobDecision(7, start_at=NOW, power_cap_fraction=0.6, gpus_per_node=1, num_nodes=2,
                                nodes=("h1", "h2")),
                    JobDecision(7, start_at=NOW, power_cap_fraction=0.6, num_nodes=2)):
        decision = enactable(Plan((decided,)), snap, verify)[0].decisions[0]
        assert (decision.gpus_per_node, decision.num_nodes, decision.nodes) == (None, None, ())  # the pin cleared
        assert (decision.start_at, decision.power_cap_fraction) == (NOW, 0.6)
        assert f"no node of its partition has {kind} GPUs" in decision.reason


def test_a_job_that_asked_for_no_type_or_a_cluster_of_no_known_type_is_held_to_its_partition_alone():
    """No type asked: any node of the partition. No node reports a type (a backend that reads
    none, the simulator's one-type cluster, whose jobs name its type): the type is not checked."""
    anything = Job(7, partition="gpu", gpus_per_node=2, eligible_time=NOW + 3600, admin_comment=ALONE)
    assert typed(anything, JobDecision(7, start_at=NOW, gpus_per_node=8, nodes=("a1",))) == [
        SetGpus(7, 8, None), SetNodes(7, ("a1",)), SetStartTime(7, NOW)]
    untyped = tuple(dataclasses.replace(node, gpu_type=None) for node in TYPED)
    v100 = dataclasses.replace(anything, gpu_type="v100")
    assert typed(v100, JobDecision(7, start_at=NOW, gpus_per_node=8, nodes=("a1",)), untyped) == [
        SetGpus(7, 8, None), SetNodes(7, ("a1",)), SetStartTime(7, NOW)]


# -- co-location (share_with) ----------------------------------------------------------

def pending(job_id, marker=SHARING, **kw):
    return Job(job_id, gpus_per_node=1, eligible_time=NOW + 3600, admin_comment=marker, **kw)


def running_on_shards(job_id, node="node2", comment="", marker=SHARING):
    return Job(job_id, state=JobState.RUNNING, shards_per_node=2, nodes=(node,), comment=comment,
               admin_comment=marker)


def test_a_job_joining_a_running_shard_job_asks_shards_on_its_node_before_it_starts():
    partner = running_on_shards(1, comment=sign(1, {"cap": 0.6}))
    plan = Plan((JobDecision(2, start_at=NOW, power_cap_fraction=0.6, share_with=1),))
    actions = plan_actions(snapshot(pending(2), partner), plan, NOW, sign, verify)
    assert [type(a) for a in actions] == [SetDecision, ShareGpus, SetNodes, SetStartTime]
    assert actions[1:3] == [ShareGpus(2, 1), SetNodes(2, ("node2",))]
    assert dt.verify(KEY, 2, actions[0].token) == {"cap": 0.6, "share": 1}
    # in force: a shard job pinned there with its token; only the start is left
    in_force = dataclasses.replace(pending(2), gpus_per_node=0, shards_per_node=2, nodes=("node2",),
                                   comment=actions[0].token)
    assert plan_actions(snapshot(in_force, partner), plan, NOW, sign, verify) == [SetStartTime(2, NOW)]


def test_a_pending_pair_is_pinned_to_one_node_and_both_become_shard_jobs():
    plan = Plan((JobDecision(1, start_at=NOW, nodes=("node3",), share_with=2, power_cap_fraction=0.5),
                 JobDecision(2, start_at=NOW, share_with=1, power_cap_fraction=0.8)))
    actions = plan_actions(snapshot(pending(1), pending(2)), plan, NOW, sign, verify)
    assert [a for a in actions if not isinstance(a, SetDecision)] == [
        ShareGpus(1, 2), SetNodes(1, ("node3",)), SetStartTime(1, NOW),
        ShareGpus(2, 1), SetNodes(2, ("node3",)), SetStartTime(2, NOW)]
    tokens = {a.job_id: dt.verify(KEY, a.job_id, a.token) for a in actions if isinstance(a, SetDecision)}
    assert tokens == {1: {"cap": 0.8, "share": 2}, 2: {"cap": 0.8, "share": 1}}  # one cap, the loosest
    shared, _ = colocate(plan, snapshot(pending(1), pending(2)), verify)  # what the tick stores
    assert [(d.share_with, d.nodes, d.power_cap_fraction) for d in shared.decisions] == [
        (2, ("node3",), 0.8), (1, ("node3",), 0.8)]
    assert colocate(shared, snapshot(pending(1), pending(2)), verify)[0] == shared


def test_the_pair_runs_uncapped_when_either_was_promised_no_cap():
    partner = running_on_shards(1, comment=sign(1, {}))  # a token without cap: no cap
    plan = Plan((JobDecision(2, start_at=NOW, power_cap_fraction=0.5, share_with=1),))
    shared, _ = colocate(plan, snapshot(pending(2), partner), verify)
    assert shared.decisions[0].power_cap_fraction is None and shared.decisions[0].share_with == 1


def test_a_job_that_refuses_sharing_is_never_co_located():
    for mine, theirs in ((ALONE, SHARING), (SHARING, ALONE), (SHARING, "")):
        partner = running_on_shards(1, marker=theirs)
        plan = Plan((JobDecision(2, start_at=NOW, power_cap_fraction=0.6, share_with=1),))
        actions = plan_actions(snapshot(pending(2, marker=mine), partner), plan, NOW, sign, verify)
        assert not any(isinstance(a, (ShareGpus, SetNodes)) for a in actions), (mine, theirs)
        [token] = [a for a in actions if isinstance(a, SetDecision)]
        assert dt.verify(KEY, 2, token.token) == {"cap": 0.6}  # decided alone, its own cap


def test_shares_that_cannot_be_enacted_are_dropped():
    two_gpus = dataclasses.replace(pending(2), gpus_per_node=2)
    cases = [
        (snapshot(two_gpus, running_on_shards(1)), Plan((JobDecision(2, share_with=1),))),  # two GPUs
        (snapshot(pending(2), pending(1)), Plan((JobDecision(2, nodes=("node1",), share_with=1),))),  # undecided
        (snapshot(pending(2), pending(1)), Plan((JobDecision(2, share_with=1), JobDecision(1, share_with=2)))),
        (snapshot(pending(2)), Plan((JobDecision(2, share_with=9),))),  # gone
        (snapshot(pending(2), pending(3), running_on_shards(1)),  # job 1 is in two pairs
         Plan((JobDecision(2, share_with=1), JobDecision(3, share_with=1)))),
    ]
    for snap, plan in cases[:4]:
        shared, sharing = colocate(plan, snap, verify)
        assert sharing == {} and all(d.share_with is None for d in shared.decisions), plan
    snap, plan = cases[4]
    shared, sharing = colocate(plan, snap, verify)
    assert set(sharing) == {2} and [d.share_with for d in shared.decisions] == [1, None]


def test_a_partner_on_whole_gpus_is_never_joined_on_slurm():
    """Slurm gives no shards of a GPU allocated whole: the job is decided alone rather than
    blocked until its deadline. A backend without Slurm's limits (the simulator) may join it."""
    whole = Job(1, state=JobState.RUNNING, gpus_per_node=1, nodes=("node2",), admin_comment=SHARING)
    plan = Plan((JobDecision(2, start_at=NOW, share_with=1),))
    assert plan_actions(snapshot(pending(2), whole), plan, NOW) == [SetStartTime(2, NOW)]
    simulated = snapshot(pending(2), whole, version="sim")
    assert plan_actions(simulated, plan, NOW) == [ShareGpus(2, 1), SetNodes(2, ("node2",)), SetStartTime(2, NOW)]


def test_a_share_never_turns_back_into_whole_gpus():
    """A decided GPU count must not undo the shard request of a shared decision."""
    in_force = dataclasses.replace(pending(2), gpus_per_node=0, shards_per_node=2, nodes=("node2",))
    plan = Plan((JobDecision(2, start_at=NOW, gpus_per_node=1, share_with=1),))
    assert plan_actions(snapshot(in_force, running_on_shards(1)), plan, NOW) == [SetStartTime(2, NOW)]


def test_a_pending_pair_no_one_placed_goes_where_a_whole_gpu_is_free_and_no_shard_is_used():
    nodes = (Node("node1", gpus_total=4, shards_total=16), Node("node2", gpus_total=4, gpus_allocated=3, shards_total=16),
             Node("node3", gpus_total=4, gpus_allocated=4, shards_total=16), Node("cpu1"),
             Node("node0", gpus_total=4, gpus_allocated=3, shards_total=16, shards_allocated=2))  # a stranger's shards
    plan = Plan(tuple(JobDecision(j, start_at=NOW, share_with=j + 1 if j % 2 else j - 1) for j in (1, 2, 3, 4)))
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="26.05.5", jobs=tuple(pending(j) for j in (1, 2, 3, 4)),
                           nodes=nodes)
    _, sharing = colocate(plan, snap)
    assert {j: s.node for j, s in sharing.items()} == {1: ("node2",), 2: ("node2",), 3: ("node1",), 4: ("node1",)}
    # the simulator (no Slurm version) places pairs itself: no pin, and pairs of more GPUs too
    wide = dataclasses.replace(snap, slurm_version="sim", jobs=tuple(
        dataclasses.replace(job, gpus_per_node=2) for job in snap.jobs), _job_index={})
    _, sharing = colocate(plan, wide)
    assert {j: s.node for j, s in sharing.items()} == dict.fromkeys((1, 2, 3, 4), ())


def test_slurm_2205_cannot_turn_whole_gpus_into_shards_so_no_such_pair_is_formed():
    plan = Plan((JobDecision(2, start_at=NOW, share_with=1),))
    for version, formed in (("22.05.8", False), ("23.11.1", False), ("24.11.5", True), ("26.05.5", True), ("", True)):
        snap = ClusterSnapshot(taken_at=NOW, slurm_version=version, jobs=(pending(2), running_on_shards(1)))
        assert bool(colocate(plan, snap)[1]) is formed, version
    already_shards = dataclasses.replace(pending(2), gpus_per_node=0, shards_per_node=2)  # asked shards at submit
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="22.05.8", jobs=(already_shards, running_on_shards(1)))
    assert plan_actions(snap, plan, NOW) == [SetNodes(2, ("node2",)), SetStartTime(2, NOW)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.sampled_from([0, 1, 2]), st.integers(1, 8)),
                min_size=2, max_size=8),
       st.sampled_from(["22.05.8", "24.11.5", "sim"]))
def test_colocate_never_pairs_a_refusing_job_nor_a_job_twice(jobs, version):
    """Random jobs (share?, running on shards?, GPUs, whom the decision pairs it with)."""
    snap_jobs = []
    for i, (share, running, gpus, _) in enumerate(jobs, start=1):
        marker = SHARING if share else ALONE
        if running:
            snap_jobs.append(running_on_shards(i, node=f"node{i % 3}", marker=marker))
        else:
            snap_jobs.append(dataclasses.replace(pending(i, marker=marker), gpus_per_node=gpus))
    nodes = tuple(Node(f"node{n}", gpus_total=4, shards_total=16) for n in range(3))
    snap = ClusterSnapshot(taken_at=NOW, slurm_version=version, jobs=tuple(snap_jobs), nodes=nodes)
    plan = Plan(tuple(JobDecision(i, start_at=NOW, share_with=partner)
                      for i, (_, running, _, partner) in enumerate(jobs, start=1) if not running))
    shared, sharing = colocate(plan, snap)
    partners = {j: s.partner.job_id for j, s in sharing.items()}
    for job_id, partner in partners.items():
        assert sharing_allowed(snap.job(job_id)) and sharing_allowed(snap.job(partner))
        assert partner != job_id and partners.get(partner, job_id) == job_id  # pairs, each job in one
    assert len(set(partners.values())) == len(partners)  # no job is the partner of two
    assert {d.job_id for d in shared.decisions if d.share_with is not None} == set(partners)


# --- time limits ------------------------------------------------------------------------

LIMITED = format_marker(GreenOptions(max_delay_s=3600, time_limit_s=3600.0))  # submitted with --time=60


def limited_job(limit_now: float = 3600.0, marker: str = LIMITED) -> Job:
    return Job(7, gpus_per_node=4, admin_comment=marker, time_limit_s=limit_now, eligible_time=NOW + 3600,
               partition="gpu")


def limit_actions(job: Job, expected_s: float | None, max_time_s: float | None = None) -> list:
    plan = Plan((JobDecision(7, start_at=NOW, gpus_per_node=2, expected_runtime_s=expected_s),))
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,),
                           partitions=(Partition("gpu", max_time_s=max_time_s),))
    return [a for a in plan_actions(snap, plan, NOW, sign, verify) if isinstance(a, SetTimeLimit)]


MAINT = Reservation("maint", NOW + 3600, NOW + 3 * 3600, ("node1", "node2"))


def pinned(job: Job, maint: Reservation = MAINT, start_at: float = NOW, expected_s: float | None = None,
           share_with: int | None = None) -> tuple[JobDecision, list]:
    """The decision and actions, with ``maint`` booked, for ``job`` pinned to node1."""
    plan = Plan((JobDecision(job.job_id, start_at=start_at, nodes=("node1",), num_nodes=1, gpus_per_node=1,
                             power_cap_fraction=0.7, expected_runtime_s=expected_s, share_with=share_with,
                             reason="start now"),))
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,), partitions=(Partition("gpu"),),
                           reservations=(maint,))
    kept, _ = enactable(plan, snap)
    return kept.decisions[0], plan_actions(snap, plan, NOW)


@pytest.mark.parametrize("limit_h, expected_h, start_h, in_it, dropped", [
    (1.5, None, 0, "", True),        # its limit reaches 30 min into the maintenance
    (0.5, None, 0, "", False),       # done before it begins
    (0.5, 1.5, 0, "", True),         # the raise the decision needs (slowed 3 x) reaches into it
    (None, None, 0, "", True),       # no limit: no end
    (1.5, None, 3, "", False),       # deferred past it
    (1.5, None, 0, "maint", False),  # a job of the reservation itself
])
def test_no_job_is_pinned_to_a_node_a_reservation_holds_before_it_would_end(
        limit_h, expected_h, start_h, in_it, dropped):
    """Slurm starts no job on a reserved node whose limit reaches into the reservation; the pin
    goes (Slurm places the job), its size, start and cap stay."""
    limit = limit_h * 3600.0 if limit_h is not None else None
    marker = format_marker(GreenOptions(max_delay_s=6 * 3600, time_limit_s=limit))
    job = Job(7, gpus_per_node=1, admin_comment=marker, time_limit_s=limit, eligible_time=NOW + 3600,
              partition="gpu", reservation=in_it)
    decision, actions = pinned(job, start_at=NOW + start_h * 3600,
                               expected_s=expected_h * 3600.0 if expected_h is not None else None)
    assert (decision.nodes is None) == dropped, decision
    assert (decision.gpus_per_node, decision.power_cap_fraction) == (1, 0.7)
    assert any(isinstance(a, SetNodes) for a in actions) != dropped
    assert ("node1 is in reservation maint from 1.0 h on" in decision.reason) == dropped, decision.reason


def grown_per_gpu(**asks) -> JobDecision:
    """A 1-GPU job asking CPUs or memory per GPU, decided 4 GPUs on 64-CPU, 512,000-MiB nodes of 4 GPUs."""
    job = Job(7, gpus_per_node=1, cpus=asks.get("cpus_per_gpu", 1), admin_comment=SHARING, partition="gpu", **asks)
    nodes = tuple(Node(f"node{i}", gpus_total=4, cpus_total=64, memory_total_mib=512_000) for i in (1, 2))
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,), nodes=nodes,
                           partitions=(Partition("gpu", nodes=("node1", "node2")),))
    decision = JobDecision(7, start_at=NOW, gpus_per_node=4, num_nodes=1, power_cap_fraction=0.5,
                           expected_runtime_s=900.0, reason="start now")
    kept, _ = enactable(Plan((decision,)), snap)
    return kept.decisions[0]


@pytest.mark.parametrize("asks, most", [
    ({"cpus_per_gpu": 32}, 2),                   # 4 x 32 CPUs: no node has 128
    ({"memory_per_gpu_mib": 200_000}, 2),        # 4 x 200,000 MiB: no node has 800,000
    ({"cpus_per_gpu": 64}, None),                # 2 x 64 neither: it keeps its own 1 GPU
])
def test_a_job_asking_cpus_or_memory_per_gpu_is_grown_only_as_far_as_a_node_holds(asks, most):
    decided = grown_per_gpu(**asks)
    assert (decided.gpus_per_node, decided.power_cap_fraction, decided.expected_runtime_s) == (most, None, None)
    assert "more CPUs or memory than any node it may run on has" in decided.reason


@pytest.mark.parametrize("asks", [{"cpus_per_gpu": 16}, {"memory_per_gpu_mib": 100_000}, {}])
def test_a_size_whose_cpus_and_memory_a_node_holds_stands(asks):
    assert (grown_per_gpu(**asks).gpus_per_node, grown_per_gpu(**asks).power_cap_fraction) == (4, 0.5)


WHOLE = Reservation("maint", NOW + 3600, NOW + 3 * 3600, ("node1", "node2"))


def around(maint: Reservation, limit_h: float, decision: JobDecision) -> JobDecision:
    """``decision`` as enacted for a job asking ``limit_h`` hours on partition gpu (node1, node2)."""
    marker = format_marker(GreenOptions(max_delay_s=6 * 3600, time_limit_s=limit_h * 3600))
    job = Job(7, gpus_per_node=1, admin_comment=marker, time_limit_s=limit_h * 3600, eligible_time=NOW + 6 * 3600,
              partition="gpu")
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,),
                           nodes=(Node("node1", gpus_total=4), Node("node2", gpus_total=4)),
                           partitions=(Partition("gpu", nodes=("node1", "node2")),), reservations=(maint,))
    kept, _ = enactable(Plan((decision,)), snap)
    return kept.decisions[0]


def test_a_job_is_not_deferred_into_a_maintenance_it_would_have_run_before():
    """Deferred 2 h, a 50-minute job would meet the maintenance of both nodes (1 h on) and wait
    for its end; started now it is done before: started now, at its decided cap."""
    decided = around(WHOLE, 50 / 60, JobDecision(7, start_at=NOW + 7200, power_cap_fraction=0.7,
                                                 expected_runtime_s=3000.0, reason="a cleaner hour"))
    assert decided.start_at is None and decided.power_cap_fraction == 0.7
    assert "reservation maint holds every node it may run on from 1.0 h on" in decided.reason, decided.reason


def test_a_job_slowed_into_a_maintenance_runs_as_submitted():
    """Capped, a 50-minute job needs 70 minutes, into the maintenance: it runs now as submitted,
    uncapped, at its own size and limit."""
    decided = around(WHOLE, 50 / 60, JobDecision(7, start_at=NOW, gpus_per_node=2, power_cap_fraction=0.5,
                                                 expected_runtime_s=4200.0, reason="start now"))
    assert (decided.gpus_per_node, decided.num_nodes, decided.power_cap_fraction) == (None, None, None)  # as it is
    assert decided.expected_runtime_s == 3000.0 and "as submitted, now" in decided.reason


def test_a_job_whose_user_chose_its_nodes_runs_as_submitted_on_them_ahead_of_a_maintenance():
    """A ``-w node1`` job slowed into the maintenance runs now as submitted: its user's node
    list stays (clearing it would run the job where its user did not want it)."""
    marker = format_marker(GreenOptions(max_delay_s=6 * 3600, time_limit_s=3000.0, own_nodes=True))
    job = Job(7, gpus_per_node=1, admin_comment=marker, time_limit_s=3000.0, eligible_time=NOW + 6 * 3600,
              partition="gpu", nodes=("node1",))
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,),
                           nodes=(Node("node1", gpus_total=4), Node("node2", gpus_total=4)),
                           partitions=(Partition("gpu", nodes=("node1", "node2")),), reservations=(WHOLE,))
    plan = Plan((JobDecision(7, start_at=NOW, power_cap_fraction=0.5, expected_runtime_s=4200.0, reason="now"),))
    [kept] = enactable(plan, snap)[0].decisions
    assert kept.nodes is None and kept.power_cap_fraction is None and "as submitted, now" in kept.reason, kept
    assert not [a for a in plan_actions(snap, plan, NOW) if isinstance(a, SetNodes)]


@pytest.mark.parametrize("maint, limit_h", [
    (WHOLE, 1.5),                                                        # into it even as submitted
    (Reservation("half", NOW + 3600, NOW + 3 * 3600, ("node1",)), 50 / 60),  # node2 stays free
])
def test_a_decision_the_job_as_submitted_could_not_beat_stands(maint, limit_h):
    decision = JobDecision(7, start_at=NOW + 7200, power_cap_fraction=0.7, reason="a cleaner hour")
    assert around(maint, limit_h, decision) == decision


def test_a_pin_dropped_for_a_reservation_clears_one_set_before_and_its_share():
    """A job an earlier tick pinned to node1 (ReqNodeList) has that pin cleared, and a share,
    which needs the pin, goes; an active reservation says "now"."""
    now_on = Reservation("now-on", NOW - 60, NOW + 600, ("node1",))
    job = Job(7, gpus_per_node=1, admin_comment=SHARING, time_limit_s=3600.0, nodes=("node1",), partition="gpu")
    decision, actions = pinned(job, now_on, share_with=8)
    assert (decision.nodes, decision.share_with) == ((), None)
    assert SetNodes(7, ()) in actions and "node1 is in reservation now-on now" in decision.reason


def test_a_decision_that_slows_a_job_raises_its_limit_before_it_starts():
    job = limited_job()
    plan = Plan((JobDecision(7, start_at=NOW, gpus_per_node=2, expected_runtime_s=1.3 * 3600 + 1),))
    actions = plan_actions(snapshot(job), plan, NOW, sign, verify)
    assert [type(a) for a in actions] == [SetGpus, SetTimeLimit, SetStartTime]  # the start comes last
    assert actions[1] == SetTimeLimit(7, 4740.0)  # 78 min 1 s, up to whole minutes


def test_no_job_is_slowed_past_its_own_deadline():
    """Slurm cancels a job (DEADLINE) whose limit no longer ends by its --deadline: a raise to
    78 min against a deadline 70 min on is enacted as asked; 90 min on, it stands."""
    for ends_in_min, raised in ((70, False), (90, True)):
        job = dataclasses.replace(limited_job(), deadline=NOW + ends_in_min * 60)
        plan = Plan((JobDecision(7, start_at=NOW, power_cap_fraction=0.6, expected_runtime_s=1.3 * 3600 + 1),))
        snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,), partitions=(Partition("gpu"),))
        kept, _ = enactable(plan, snap)
        limits = [a for a in plan_actions(snap, plan, NOW, sign, verify) if isinstance(a, SetTimeLimit)]
        assert (limits == [SetTimeLimit(7, 4740.0)]) == raised, limits
        assert (kept.decisions[0].power_cap_fraction == 0.6) == raised
        assert ("outrun its --deadline" in kept.decisions[0].reason) != raised


def test_a_raised_limit_is_in_force_at_the_next_tick_and_not_raised_again():
    assert limit_actions(limited_job(limit_now=4740.0), 1.3 * 3600 + 1) == []


def test_a_limit_the_controller_raised_comes_back_down_when_the_job_is_no_longer_slowed():
    assert limit_actions(limited_job(limit_now=4740.0), 3600.0) == [SetTimeLimit(7, 3600.0)]


def test_a_limit_is_never_set_below_the_one_submitted():
    assert limit_actions(limited_job(), 0.5 * 3600) == []  # a faster configuration keeps the user's limit


def test_a_limit_its_user_lowered_is_left_alone_unless_the_job_is_slowed():
    assert limit_actions(limited_job(limit_now=1800.0), 3600.0) == []
    assert limit_actions(limited_job(limit_now=1800.0), 2 * 3600.0) == [SetTimeLimit(7, 7200.0)]


def test_a_raise_within_the_partition_max_time_is_made():
    assert limit_actions(limited_job(), 2 * 3600.0, max_time_s=2 * 3600.0) == [SetTimeLimit(7, 7200.0)]


def test_a_decision_that_would_slow_a_job_past_its_partitions_max_time_is_enacted_as_asked():
    """Slurm would stop it at MaxTime whatever its limit: the start is kept, the shrink and the
    cap are not, and what is stored says why."""
    job = limited_job()
    plan = Plan((JobDecision(7, start_at=NOW + 600, gpus_per_node=2, power_cap_fraction=0.6, nodes=("node1",),
                             expected_runtime_s=2 * 3600.0 + 1, energy_as_asked_kwh=3.0, expected_energy_kwh=2.0),))
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,),
                           partitions=(Partition("gpu", max_time_s=2 * 3600.0),))
    [kept] = enactable(plan, snap, verify)[0].decisions
    assert (kept.start_at, kept.gpus_per_node, kept.power_cap_fraction, kept.nodes) == (NOW + 600, None, None, None)
    assert (kept.expected_runtime_s, kept.expected_energy_kwh) == (3600.0, 3.0) and "MaxTime" in kept.reason
    assert plan_actions(snap, plan, NOW, sign, verify) == [SetStartTime(7, NOW + 600)]  # no GPUs, cap, pin, limit
    # without a MaxTime (or within it) the decision stands
    assert enactable(plan, snapshot(job), verify)[0] == plan


def test_a_job_an_earlier_tick_resized_goes_back_to_its_own_size_when_enacted_as_asked():
    """Tick 1 shrinks a 4-GPU job to 2 (within MaxTime); tick 2's decision, capped too, would slow
    it past MaxTime: it is enacted as asked, which is its submitted 4 GPUs, not the 2 of tick 1
    (at 2 GPUs and the limit as submitted Slurm would stop it before it ended)."""
    memo = DecisionMemo()
    partitions = (Partition("gpu", max_time_s=2 * 3600.0),)
    shrink = JobDecision(7, start_at=NOW, gpus_per_node=2, expected_runtime_s=1.5 * 3600.0)
    first, _ = enactable(Plan((shrink,)), ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5",
                                                          jobs=(limited_job(),), partitions=partitions), memo=memo)
    assert first.decisions == (shrink,)
    shrunk = dataclasses.replace(limited_job(limit_now=5400.0), gpus_per_node=2)
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(shrunk,), partitions=partitions)
    capped = Plan((dataclasses.replace(shrink, power_cap_fraction=0.6, expected_runtime_s=2.5 * 3600.0),))
    [kept] = enactable(capped, snap, memo=memo)[0].decisions
    assert (kept.gpus_per_node, kept.power_cap_fraction, kept.expected_runtime_s) == (4, None, 3600.0), kept
    actions = plan_actions(snap, capped, NOW, sign, verify, memo=memo)
    assert SetGpus(7, 4, None) in actions and SetTimeLimit(7, 3600.0) in actions, actions


def test_a_job_submitted_to_several_partitions_is_held_to_the_smallest_max_time():
    """Its Partition reads "gpu,long" until it starts; slowed past gpu's MaxTime it is enacted
    as asked, not raised past it (it would then wait, PartitionTimeLimit, for ever in gpu)."""
    job = dataclasses.replace(limited_job(), partition="gpu,long")
    plan = Plan((JobDecision(7, start_at=NOW, power_cap_fraction=0.5, expected_runtime_s=3 * 3600.0),))
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,),
                           partitions=(Partition("gpu", max_time_s=2 * 3600.0), Partition("long")))
    assert not [a for a in plan_actions(snap, plan, NOW, sign, verify) if isinstance(a, SetTimeLimit)]
    assert enactable(plan, snap, verify)[0].decisions[0].power_cap_fraction is None


def test_no_limit_is_set_without_a_submitted_one_or_an_expected_runtime():
    assert limit_actions(limited_job(marker=ALONE), 2 * 3600.0) == []  # no partition default known: nothing to scale
    assert limit_actions(limited_job(), None) == []
    assert limit_actions(limited_job(), float("inf")) == []


@pytest.mark.parametrize(("partition", "raised"), [
    (Partition("gpu", default_time_s=3600.0, max_time_s=4 * 3600.0), 2 * 3600.0),  # DefaultTime: scaled from it
    (Partition("gpu", max_time_s=3600.0), 3600.0),  # no DefaultTime: the job got MaxTime, the bound too
    (Partition("other", default_time_s=3600.0), None),  # not the job's partition: nothing known
    (Partition("gpu"), None),  # unlimited: nothing to raise
])
def test_a_job_submitted_without_a_limit_is_scaled_from_its_partitions_default(partition, raised):
    """No ``limit=`` in the marker (no --time): Slurm gave the job its partition's DefaultTime,
    else its MaxTime, which the site sets and the controller's raises cannot move."""
    job = limited_job(marker=ALONE)
    plan = Plan((JobDecision(7, start_at=NOW, gpus_per_node=2, expected_runtime_s=2 * 3600.0),))
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(job,), partitions=(partition,))
    limits = [a for a in plan_actions(snap, plan, NOW, sign, verify) if isinstance(a, SetTimeLimit)]
    assert limits == ([] if raised is None or raised == job.time_limit_s else [SetTimeLimit(7, raised)])


# --- a running job a guest joins ----------------------------------------------------------

SHARING_LIMITED = format_marker(GreenOptions(max_delay_s=3600, accept_share=True, time_limit_s=3600.0))


def host_limits(limit_now: float | None = 3600.0, stretch: float | None = 1.3, max_time_s: float | None = None,
                marker: str = SHARING_LIMITED) -> list:
    """The actions for a guest joining running job 1 (submitted with --time=60, on shards)."""
    host = dataclasses.replace(running_on_shards(1, comment=sign(1, {"cap": 0.6}), marker=marker),
                               time_limit_s=limit_now, partition="gpu", start_time=NOW - 600)
    plan = Plan((JobDecision(2, start_at=NOW, power_cap_fraction=0.6, share_with=1, partner_stretch=stretch),))
    snap = ClusterSnapshot(taken_at=NOW, slurm_version="24.11.5", jobs=(pending(2), host),
                           partitions=(Partition("gpu", max_time_s=max_time_s),))
    return plan_actions(snap, plan, NOW, sign, verify)


def test_a_running_job_a_guest_joins_gets_its_limit_raised_by_its_stretch_before_the_guest_starts():
    actions = host_limits()
    assert actions[0] == SetTimeLimit(1, 4680.0)  # 60 min x 1.3 = 78 min, before any of the guest's
    assert [type(a) for a in actions[1:]] == [SetDecision, ShareGpus, SetNodes, SetStartTime]


def test_the_raise_is_read_from_the_limit_as_submitted_so_a_waiting_guest_does_not_raise_it_again():
    assert not [a for a in host_limits(limit_now=4680.0) if isinstance(a, SetTimeLimit)]


def test_a_running_jobs_limit_is_only_ever_raised():
    """Already above what the stretch needs (raised for an earlier, slower partner, or by an
    administrator): left alone, since a running job's limit coming down could stop it."""
    assert not [a for a in host_limits(limit_now=3 * 3600.0) if isinstance(a, SetTimeLimit)]
    assert not [a for a in host_limits(stretch=1.0) if isinstance(a, SetTimeLimit)]
    assert not [a for a in host_limits(stretch=None) if isinstance(a, SetTimeLimit)]


def test_a_guest_does_not_join_a_running_job_it_would_stretch_past_its_max_time_and_an_unlimited_job_gets_no_raise():
    assert host_limits(stretch=1.5, max_time_s=5400.0)[0] == SetTimeLimit(1, 5400.0)  # just within
    joined = host_limits(stretch=1.6, max_time_s=5400.0)
    assert not [a for a in joined if isinstance(a, (SetTimeLimit, ShareGpus, SetNodes))], joined
    assert not [a for a in host_limits(limit_now=None) if isinstance(a, SetTimeLimit)]
    assert not [a for a in host_limits(marker=SHARING) if isinstance(a, SetTimeLimit)]  # no limit known to scale
