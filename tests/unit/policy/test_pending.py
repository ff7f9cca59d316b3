"""The managed pending jobs as columns: what the policies read a job's work from."""

from __future__ import annotations

import dataclasses

import pytest

from slurm_green.core.cluster import ClusterSnapshot, Job, Node, Partition
from slurm_green.core.decision import DecisionMemo
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.policy.managed import managed_pending
from slurm_green.policy.pending import pending_jobs

NOW = 1_700_000_000.0
GPU = Partition("gpu", default=True, default_time_s=3600.0, max_time_s=86400.0)


def job(limit_now: float, submitted: float | None) -> Job:
    marker = format_marker(GreenOptions(max_delay_s=3600.0, time_limit_s=submitted))
    return Job(1, partition="gpu", submit_time=NOW, time_limit_s=limit_now, gpus_per_node=2, admin_comment=marker)


@pytest.mark.parametrize(("submitted", "partition", "work"), [
    (5400.0, GPU, 5400.0),  # the marker's --time
    (None, GPU, 3600.0),  # none given: the partition's DefaultTime, which Slurm gave it
    (None, dataclasses.replace(GPU, default_time_s=None), 86400.0),  # no DefaultTime: MaxTime
    (None, dataclasses.replace(GPU, default_time_s=None, max_time_s=None), 7200.0),  # unknown: the limit now
])
def test_a_raised_limit_is_never_read_as_the_jobs_work(submitted, partition, work):
    """The controller raised the job's limit to 2 h for a slower configuration; its work stays
    what was asked, or the next decision would be slower still and the limit raised again."""
    snapshot = ClusterSnapshot(NOW, jobs=(job(7200.0, submitted),), partitions=(partition,))
    assert pending_jobs(snapshot, 600.0, DecisionMemo()).runtime_s.tolist() == [work]


def test_a_changed_partition_default_is_read_again_for_the_same_job():
    memo, pending = DecisionMemo(), job(7200.0, None)
    first = pending_jobs(ClusterSnapshot(NOW, jobs=(pending,), partitions=(GPU,)), 600.0, memo)
    longer = dataclasses.replace(GPU, default_time_s=5400.0)
    second = pending_jobs(ClusterSnapshot(NOW, jobs=(pending,), partitions=(longer,)), 600.0, memo)
    assert (first.runtime_s.tolist(), second.runtime_s.tolist()) == ([3600.0], [5400.0])


def test_no_policy_sees_a_job_before_its_users_own_begin():
    """``sbatch --begin=+1d``: the marker keeps that begin; before it the job is nobody's to
    decide (it waits on job_submit.lua's deferral), from it on every policy plans it."""
    marker = format_marker(GreenOptions(max_delay_s=3600.0, deadline=NOW + 90000.0, earliest=NOW + 86400.0))
    later = Job(2, partition="gpu", submit_time=NOW, time_limit_s=3600.0, gpus_per_node=1, admin_comment=marker)
    memo = DecisionMemo()
    for at, seen in ((NOW, []), (NOW + 86399.0, []), (NOW + 86400.0, [2]), (NOW + 86400.0 + 60, [2])):
        snapshot = ClusterSnapshot(at, jobs=(later,), partitions=(GPU,))
        assert pending_jobs(snapshot, 600.0, memo).job_id.tolist() == seen  # the memo's row is not the answer
        assert [j.job_id for j, _ in managed_pending(snapshot)] == seen


@pytest.mark.parametrize("held, reason", [(True, "JobHeldUser"), (True, "JobHeldAdmin"), (False, "Dependency"),
                                          (False, "DependencyNeverSatisfied")])
def test_no_policy_decides_for_a_job_slurm_holds_back_until_that_clears(held, reason):
    """A held job, or one waiting on another job, cannot start whatever it is decided: planned as
    startable it would take GPUs it cannot use, and a pin would bind it when freed. The first
    tick after (reason BeginTime: job_submit.lua's deferral) decides it."""
    marker = format_marker(GreenOptions(max_delay_s=3600.0, deadline=NOW + 3600.0))
    blocked = Job(3, partition="gpu", submit_time=NOW, time_limit_s=3600.0, gpus_per_node=1, admin_comment=marker,
                  held=held, state_reason=reason)
    memo = DecisionMemo()
    for job, seen in ((blocked, []), (dataclasses.replace(blocked, held=False, state_reason="BeginTime"), [3])):
        snapshot = ClusterSnapshot(NOW, jobs=(job,), partitions=(GPU,))
        assert pending_jobs(snapshot, 600.0, memo).job_id.tolist() == seen
        assert [j.job_id for j, _ in managed_pending(snapshot)] == seen


def test_no_policy_sizes_a_job_past_what_its_partitions_maxnodes_nodes_hold():
    """gpus=1-16 on 4-GPU nodes of a partition with MaxNodes=2: at most 8 (never below its
    own request); without a limit, its range."""
    marker = format_marker(GreenOptions(max_delay_s=3600.0, gpus_min=1, gpus_max=16))
    nodes = tuple(Node(f"n{i}", gpus_total=4) for i in range(4))
    asks = [Job(1, partition="gpu", submit_time=NOW, time_limit_s=3600.0, gpus_per_node=1, admin_comment=marker),
            Job(2, partition="gpu", submit_time=NOW, time_limit_s=3600.0, gpus_per_node=4, num_nodes=3,
                admin_comment=marker)]
    memo = DecisionMemo()
    for limit, most in ((2, [8, 12]), (None, [16, 16])):
        partition = dataclasses.replace(GPU, nodes=tuple(n.name for n in nodes), max_nodes=limit)
        snapshot = ClusterSnapshot(NOW, jobs=tuple(asks), nodes=nodes, partitions=(partition,))
        assert pending_jobs(snapshot, 600.0, memo).gpus_max.tolist() == most  # the memo reads the change


def test_no_policy_sizes_a_job_past_its_users_tasks_of_the_gpus_cpus_and_memory_a_node_holds():
    """gpus=1-16 on 4-GPU, 64-CPU nodes: ``-n 1`` holds it to one node (4 GPUs), 2 tasks and
    ``--cpus-per-gpu=32`` to two nodes of 2 (4); without a task count, its range (the GPUs per
    node its sizes are laid out in are the policy's: ``greenflow.options.Where``)."""
    nodes = tuple(Node(f"n{i}", gpus_total=4, cpus_total=64) for i in range(4))
    partition = dataclasses.replace(GPU, nodes=tuple(n.name for n in nodes))
    for tasks, per_gpu, most in ((1, 0, 4), (2, 32, 4), (None, 32, 16)):
        marker = format_marker(GreenOptions(max_delay_s=3600.0, gpus_min=1, gpus_max=16, tasks=tasks))
        job = Job(1, partition="gpu", submit_time=NOW, time_limit_s=3600.0, gpus_per_node=1, admin_comment=marker,
                  cpus_per_gpu=per_gpu)
        snapshot = ClusterSnapshot(NOW, jobs=(job,), nodes=nodes, partitions=(partition,))
        assert pending_jobs(snapshot, 600.0, DecisionMemo()).gpus_max.tolist() == [most]


def test_no_policy_sizes_a_job_that_asked_its_gpus_per_job_or_task():
    """No ``Gres=`` update can resize it (``Job.gpus_per_node_only``): its range is its request."""
    marker = format_marker(GreenOptions(max_delay_s=3600.0, gpus_min=1, gpus_max=8))
    asked = Job(1, partition="gpu", submit_time=NOW, time_limit_s=3600.0, gpus_per_node=2, admin_comment=marker)
    for only, bounds in ((True, ([1], [8])), (False, ([2], [2]))):
        jobs = pending_jobs(ClusterSnapshot(NOW, jobs=(dataclasses.replace(asked, gpus_per_node_only=only),),
                                            partitions=(GPU,)), 600.0, DecisionMemo())
        assert (jobs.gpus_min.tolist(), jobs.gpus_max.tolist()) == bounds
