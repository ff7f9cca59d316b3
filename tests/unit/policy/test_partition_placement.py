"""GreenFlow, PowerFlow and EaCO place a job on its partition's nodes only (``core.partitions``),
at sizes those nodes hold, so that the planner (``within_partition``) keeps every pin they decide."""

from dataclasses import replace

import pytest
from policy_literals import HOUR, NOW, context, pending, signal

from slurm_green.controller.planner import enactable, within_partition
from slurm_green.core.cluster import ClusterSnapshot, Job, Node, Partition
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.core.plan import Plan
from slurm_green.models.registry import default_registry
from slurm_green.policy.eaco import EaCoPolicy
from slurm_green.policy.greenflow import GreenFlowPolicy, powerflow

FLAT = [200.0] * 72
# Partition "b" (the default) of three 8-GPU nodes, listed first, "a" of two 4-GPU nodes: the
# cluster's common width is 8 and its first node is b's.
WIDE = tuple(Node(f"b{i}", gpus_total=8, features=(f"switch=s{i}",)) for i in range(3))
NARROW = tuple(Node(f"a{i}", gpus_total=4, features=(f"switch=t{i}",)) for i in range(2))
PARTITIONS = (Partition("a", nodes=tuple(n.name for n in NARROW)),
              Partition("b", nodes=tuple(n.name for n in WIDE), default=True))


def kept(plan: Plan, snap: ClusterSnapshot) -> dict:
    """The decisions as the planner enacts them, by job id."""
    return {d.job_id: d for d in within_partition(plan, snap).decisions}


@pytest.mark.parametrize("policy", [GreenFlowPolicy(), powerflow()], ids=["greenflow", "powerflow"])
@pytest.mark.parametrize("gpus", [2, 8])  # one node; two of a's 4-GPU nodes (8 GPUs as 2 x 4)
def test_greenflow_pins_a_job_to_its_partition_at_a_width_its_nodes_hold(models, policy, gpus):
    """b0, 2 GPUs free, is the cluster's fullest node with a fitting block."""
    fuller = (replace(WIDE[0], gpus_allocated=6, gpu_indices_allocated=tuple(range(6))), *WIDE[1:])
    asked = replace(pending(1, gpus=gpus, gpus_per_node=4), partition="a")
    snap = ClusterSnapshot(taken_at=NOW, jobs=(asked,), nodes=fuller + NARROW, partitions=PARTITIONS)
    decision = kept(policy(context(snap, signal(FLAT), models)), snap)[1]
    assert decision.nodes and set(decision.nodes) <= {"a0", "a1"}
    assert decision.gpus_per_node * len(decision.nodes) == gpus and decision.gpus_per_node <= 4
    assert "as asked" not in decision.reason  # the planner dropped nothing


@pytest.mark.parametrize("asks, tasks, gpus, per_node", [
    ({"cpus_per_gpu": 32}, None, 1, 2),             # 64 CPUs a node: 2 GPUs a node at most
    ({"memory_per_gpu_mib": 200_000}, None, 1, 2),  # 512,000 MiB a node: 2
    ({"cpus_per_gpu": 32}, 1, 1, 2),                # one task: one node of 2
    ({}, 1, 2, 4),                                  # one task: one node of 4
])
def test_greenflow_sizes_a_job_within_its_tasks_and_the_cpus_and_memory_a_node_holds(models, asks, tasks, gpus,
                                                                                     per_node):
    """On 4-GPU, 64-CPU, 512,000-MiB nodes a ``gpus=1-8`` job asking CPUs or memory per GPU, or
    giving a task count, is sized to fit by GreenFlow itself, its cap and pin included: the
    planner (``enactable``: ``sized_to_fit_nodes``, ``within_partition``) changes nothing. Before,
    GreenFlow decided 4 GPUs on one node (or 8 on two) and the planner cut the job back to 2
    GPUs a node, or to its own size, uncapped and unpinned."""
    sized = tuple(Node(f"n{i}", gpus_total=4, cpus_total=64, memory_total_mib=512_000) for i in range(4))
    marker = format_marker(GreenOptions(max_delay_s=6 * HOUR, gpus_min=1, gpus_max=8, deadline=NOW + 6 * HOUR,
                                        tasks=tasks))
    asked = replace(pending(1, gpus=gpus, gpus_per_node=4), name="resnet50", admin_comment=marker, partition="gpu",
                    **asks)
    snap = ClusterSnapshot(taken_at=NOW, jobs=(asked,), nodes=sized,
                           partitions=(Partition("gpu", nodes=tuple(n.name for n in sized), default=True),))
    plan = GreenFlowPolicy(gpu_time_slack=1.0)(context(snap, signal(FLAT), models))
    [decision] = plan.decisions
    assert decision.gpus_per_node <= per_node and decision.num_nodes <= (tasks or 4), decision
    assert decision.gpus_per_node * decision.num_nodes > gpus  # grown (else this would test nothing)
    assert decision.nodes and len(decision.nodes) == decision.num_nodes
    assert enactable(plan, snap)[0] == plan


def test_greenflow_pins_a_typed_job_to_its_partitions_nodes_of_that_type(models):
    """The h100 pool spans both partitions; a job of "q" asking for h100 goes on q's h100 node."""
    typed = (Node("h0", gpus_total=8, gpu_type="h100"), Node("x0", gpus_total=8, gpu_type="a40"),
             Node("h1", gpus_total=8, gpu_type="h100"), Node("x1", gpus_total=8, gpu_type="a40"))
    partitions = (Partition("p", nodes=("h0", "x0"), default=True), Partition("q", nodes=("h1", "x1")))
    asked = replace(pending(1, gpus=2), partition="q", gpu_type="h100")
    snap = ClusterSnapshot(taken_at=NOW, jobs=(asked,), nodes=typed, partitions=partitions)
    decision = kept(GreenFlowPolicy()(context(snap, signal(FLAT), models)), snap)[1]
    assert decision.nodes == ("h1",)


def test_greenflow_does_not_start_a_job_whose_partition_is_full_on_another_partitions_nodes(models):
    busy = tuple(replace(node, gpus_allocated=4) for node in NARROW)
    asked = replace(pending(1, gpus=2), partition="a")
    snap = ClusterSnapshot(taken_at=NOW, jobs=(asked,), nodes=WIDE + busy, partitions=PARTITIONS)
    decision = kept(GreenFlowPolicy()(context(snap, signal(FLAT), models)), snap)[1]
    assert not decision.nodes and "queued at its requested size" in decision.reason


def sharing(job_id: int, name: str, partition: str) -> Job:
    """A one-GPU job that allows a shared GPU (two light ones pair within EaCO's bound)."""
    marker = format_marker(GreenOptions(max_delay_s=6 * HOUR, accept_share=True, deadline=NOW + 6 * HOUR))
    return Job(job_id, name=name, partition=partition, submit_time=NOW - 100 + job_id, time_limit_s=HOUR,
               gpus_per_node=1, admin_comment=marker)


def shared(jobs: list[Job]) -> dict:
    snap = ClusterSnapshot(taken_at=NOW, jobs=tuple(jobs), nodes=NARROW + WIDE, partitions=PARTITIONS)
    return kept(EaCoPolicy()(context(snap, None, default_registry())), snap)


LIGHT, LIGHT2 = "ResNet-18 (batch size 16)", "Recommendation (batch size 512)"


def test_eaco_pins_a_host_and_its_guest_to_their_partition():
    """The fullest node with a free GPU is a's (4 free against 8); the pair asked for b."""
    plan = shared([sharing(1, LIGHT, "b"), sharing(2, LIGHT2, "b")])
    assert plan[2].share_with == 1
    assert plan[1].nodes == plan[2].nodes and set(plan[1].nodes) <= {"b0", "b1", "b2"}


def test_eaco_does_not_pair_a_guest_with_a_host_outside_its_partition():
    plan = shared([sharing(1, LIGHT, "b"), sharing(2, LIGHT2, "a")])
    assert plan[2].share_with is None and not plan[2].nodes
    assert shared([sharing(1, LIGHT, "b"), sharing(2, LIGHT2, "b")])[2].share_with == 1  # the same pair, in b
