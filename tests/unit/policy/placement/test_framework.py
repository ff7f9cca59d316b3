import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_literals import IDLE, state
from slurm_green.core.cluster import ClusterSnapshot, Job, Node, NodeState
from slurm_green.policy.placement.framework import UNREPORTED, Nodes, Options, Request, free_after, options_for, take, whole_slots
from slurm_green.policy.placement.scorer import Context, Scorer


def test_a_shard_request_is_its_share_of_one_gpu():
    assert Request.from_job(Job(1, shards_per_node=2), shards_per_gpu=8) == Request(1, 250)
    assert Request.from_job(Job(1, gpus_per_node=4), shards_per_gpu=8) == Request(4, 1000)
    with pytest.raises(ValueError, match="do not fit one GPU"):
        Request.from_job(Job(1, shards_per_node=9), shards_per_gpu=8)
    both = Job(1, gpus_per_node=2, num_nodes=2, cpus=8, memory_mib=16000)
    assert Request.from_job(both, shards_per_gpu=8) == Request(2, 1000, cpu_milli=4000, mem_mib=8000)


def test_a_request_is_whole_gpus_or_one_partial_gpu():
    with pytest.raises(ValueError):
        Request(2, 500)
    assert Request(1, 300).partial and not Request(2).partial and Request(2).total_milli == 2000


def test_a_snapshot_reads_whole_gpus_and_packs_shards_on_the_other_gpus():
    node = Node("a", NodeState.MIXED, gpus_total=4, gpus_allocated=1, gpu_indices_allocated=(2,),
                shards_total=16, shards_allocated=6, gpu_type="h100")
    down = Node("b", NodeState.DOWN, gpus_total=4)
    nodes = Nodes.from_snapshot(ClusterSnapshot(0.0, nodes=(node, down)))
    assert nodes.names == ("a",)
    # 4 shards per GPU: 6 shards fill GPU 0 and half of GPU 1; GPU 2 is allocated whole.
    assert nodes.gpu_free.tolist() == [[0, 500, 0, 1000]]
    assert nodes.cpu_free.tolist() == nodes.mem_free.tolist() == [UNREPORTED]  # not reported: never limits
    known = Node("a", gpus_total=4, cpus_total=64, cpus_allocated=60, memory_total_mib=1000, memory_allocated_mib=200)
    read = Nodes.from_snapshot(ClusterSnapshot(0.0, nodes=(known,)))
    assert (read.cpu_free.tolist(), read.mem_free.tolist()) == ([4000], [800])


def test_options_are_one_per_node_for_whole_gpus_and_one_per_distinct_free_amount_for_a_share():
    nodes = state([[1000, 400, 400, 1000], [200, 200, 200, 200]])
    whole = options_for(nodes, Request(2), np.array([True, False]))
    assert whole.node.tolist() == [0] and whole.gpu.tolist() == [-1]
    share = options_for(nodes, Request(1, 300), np.array([True, True]))
    assert list(zip(share.node.tolist(), share.gpu.tolist(), strict=True)) == [(0, 0), (0, 1)]


def test_whole_gpus_take_an_aligned_block_when_a_node_has_one():
    nodes = state([[0, 1000, 1000, 1000]])
    assert whole_slots(nodes, 0, 2).tolist() == [2, 3]
    assert whole_slots(nodes, 0, 3).tolist() == [1, 2, 3]


def test_take_changes_exactly_the_request_and_refuses_what_does_not_fit():
    nodes = state([IDLE, [600, 1000, 1000, 1000]], cpu=[8000, 8000])
    assert take(nodes, Request(1, 500, cpu_milli=2000), 1, 0).tolist() == [0]
    assert nodes.gpu_free[1].tolist() == [100, 1000, 1000, 1000] and nodes.cpu_free.tolist() == [8000, 6000]
    with pytest.raises(ValueError, match="has 100/1000 free"):
        take(nodes, Request(1, 500), 1, 0)
    with pytest.raises(ValueError, match="has 3 free GPUs"):
        take(nodes, Request(4), 1, -1)


def test_free_after_is_the_state_each_option_would_leave():
    nodes = state([[1000, 300, 1000, 1000]])
    assert free_after(nodes, Request(2), Options(np.array([0]), np.array([-1]))).tolist() == [[0, 300, 0, 1000]]
    assert free_after(nodes, Request(1, 200), Options(np.array([0]), np.array([1]))).tolist() == [[1000, 100, 1000, 1000]]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=30))
def test_shard_jobs_never_overcommit_a_gpus_shards(shards):
    # Two nodes of 2 GPUs with 4 shards each, one GPU of n0 allocated whole.
    snapshot = ClusterSnapshot(0.0, nodes=(
        Node("n0", NodeState.MIXED, gpus_total=2, gpus_allocated=1, gpu_indices_allocated=(0,), shards_total=8),
        Node("n1", NodeState.IDLE, gpus_total=2, shards_total=8)))
    nodes = Nodes.from_snapshot(snapshot)
    scorer = Scorer.from_weights({"packing": 1.0}, Context(nodes))
    placed = 0
    for i, count in enumerate(shards):
        if scorer.place(nodes, Request.from_job(Job(i, shards_per_node=count), shards_per_gpu=4)) is not None:
            placed += count
    used_shards = nodes.gpu_used * 4 // 1000
    assert (nodes.gpu_used % 250 == 0).all() and (used_shards <= 4).all()
    assert used_shards.sum() == placed + 4  # plus the whole GPU, 4 shards' worth
