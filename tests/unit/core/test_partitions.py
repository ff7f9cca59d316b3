"""The one rule of which nodes a pending job may run on (planner and placing policies alike)."""

from dataclasses import replace

import pytest

from slurm_green.core.cluster import ClusterSnapshot, Job, Node, Partition
from slurm_green.core.decision import DecisionMemo
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.core.partitions import node_rules

NODES = (Node("a1", gpus_total=4, gpu_type="h100"), Node("a2", gpus_total=4, gpu_type="a40"),
         Node("b1", gpus_total=8, gpu_type="h100"), Node("b2", gpus_total=8, gpu_type="a40"),
         Node("b3", gpus_total=8, gpu_type="a40"))
PARTITIONS = (Partition("a", nodes=("a1", "a2")), Partition("b", nodes=("b1", "b2", "b3"), default=True),
              Partition("all", nodes=("ALL",)), Partition("none"))


def allowed(partition: str, gpu_type: str | None = None, nodes: tuple[Node, ...] = NODES):
    snap = ClusterSnapshot(taken_at=0.0, nodes=nodes, partitions=PARTITIONS)
    return node_rules(snap).allowed(Job(1, partition=partition, gpu_type=gpu_type))


@pytest.mark.parametrize("partition, expected", [
    ("a", {"a1", "a2"}), ("", {"b1", "b2", "b3"}), ("a,b", {"a1", "a2", "b1", "b2", "b3"}),
    ("a,gone", {"a1", "a2"}),  # a partition the snapshot does not list adds nothing
    ("all", None), ("none", None), ("a,all", None),  # a node list not known: every node
    ("gone", None),  # only partitions the snapshot does not list: nothing to hold it to
])
def test_a_job_runs_on_its_partitions_nodes(partition, expected):
    assert allowed(partition) == (None if expected is None else frozenset(expected))


def test_a_requested_gpu_type_holds_a_job_to_nodes_of_that_type_where_types_are_known():
    assert allowed("a", "h100") == {"a1"}
    assert allowed("b", "a40") == {"b2", "b3"}
    assert allowed("all", "h100") == {"a1", "b1"}  # every node, of that type
    assert allowed("a", "b200") == frozenset()  # no node of its partition has it
    untyped = tuple(replace(node, gpu_type=None) for node in NODES)
    assert allowed("a", "h100", untyped) == {"a1", "a2"}  # no node reports a type: not checked


def test_the_memo_keeps_the_rule_while_names_types_counts_and_partitions_stay():
    memo = DecisionMemo()
    snap = ClusterSnapshot(taken_at=0.0, nodes=NODES, partitions=PARTITIONS)
    rules = node_rules(snap, memo)
    busy = tuple(replace(node, gpus_allocated=1) for node in NODES)  # new objects, same names and types
    assert node_rules(replace(snap, nodes=busy, partitions=tuple(PARTITIONS)), memo) is rules
    moved = replace(snap, partitions=(replace(PARTITIONS[0], nodes=("a1",)), *PARTITIONS[1:]))
    assert node_rules(moved, memo).allowed(Job(1, partition="a")) == {"a1"}
    retyped = replace(snap, nodes=(replace(NODES[0], gpu_type="a40"), *NODES[1:]))
    assert node_rules(retyped, memo).allowed(Job(1, partition="a", gpu_type="h100")) == frozenset()


@pytest.mark.parametrize("partition, expected", [
    ("a", 1), ("", None),  # the default partition b sets none
    ("a,c", 3),  # Slurm may start it in either: the larger
    ("a,b", None), ("gone", None),  # one without a limit, or none the snapshot lists: no limit known
])
def test_the_most_nodes_a_job_may_have_is_the_largest_maxnodes_of_its_partitions(partition, expected):
    partitions = (Partition("a", nodes=("a1", "a2"), max_nodes=1), Partition("b", nodes=("b1", "b2"), default=True),
                  Partition("c", nodes=("b3",), max_nodes=3))
    snap = ClusterSnapshot(taken_at=0.0, nodes=NODES, partitions=partitions)
    assert node_rules(snap).max_nodes(Job(1, partition=partition)) == expected


@pytest.mark.parametrize("limit, tasks, asked, expected", [
    (None, None, 1, None), (None, 1, 1, 1), (3, 2, 1, 2), (1, 4, 1, 1),
    (1, 1, 2, 2),  # never below the nodes it asked for
])
def test_the_most_nodes_a_job_may_have_counts_maxnodes_and_its_users_tasks(limit, tasks, asked, expected):
    snap = ClusterSnapshot(taken_at=0.0, nodes=NODES, partitions=(Partition("a", nodes=("a1", "a2"), max_nodes=limit),))
    marker = format_marker(GreenOptions(max_delay_s=3600.0, tasks=tasks))
    assert node_rules(snap).most_nodes(Job(1, partition="a", num_nodes=asked, admin_comment=marker)) == expected


SIZED = (Node("s1", gpus_total=4, cpus_total=64, memory_total_mib=512_000),
         Node("s2", gpus_total=8, cpus_total=96, memory_total_mib=256_000),
         Node("s3", gpus_total=8))  # CPUs and memory not known: not checked


@pytest.mark.parametrize("names, asks, expected", [
    ({"s1", "s2"}, {}, 8),                                          # no per-GPU ask: the widest node
    ({"s1", "s2"}, {"cpus_per_gpu": 32}, 3),                        # 96 // 32 on s2; 64 // 32 on s1
    ({"s1", "s2"}, {"memory_per_gpu_mib": 200_000}, 2),             # only s1 holds two
    ({"s1", "s2"}, {"cpus_per_gpu": 16, "memory_per_gpu_mib": 100_000}, 4),  # s1: 4 GPUs; s2: 2 of memory
    ({"s1"}, {"cpus_per_gpu": 128}, 0),                             # not one GPU's CPUs
    ({"s1", "s3"}, {"cpus_per_gpu": 128}, 8),
])
def test_the_most_gpus_per_node_a_job_may_have_fits_its_cpus_and_memory_per_gpu(names, asks, expected):
    rules = node_rules(ClusterSnapshot(taken_at=0.0, nodes=SIZED))
    assert rules.most_gpus_per_node(Job(1, **asks), frozenset(names)) == expected
