import dataclasses

import numpy as np

from policy_literals import nodes, snapshot
from slurm_green.core.decision import DecisionMemo
from slurm_green.policy.placement.network import FreeGpus, fragmentation, gpus_free


def test_buddy_block_is_aligned_on_the_fullest_node_that_has_one():
    # n0: 0 and 2 taken (no aligned pair in 0-3, but 4-5 free); n1 empty.
    free = FreeGpus.from_snapshot(snapshot([], nodes(2, used={0: (0, 2)})), DecisionMemo())
    assert free.place(2, 1) == ("n0",)
    assert not free.free[0, 4] and not free.free[0, 5] and free.free[0, 1] and free.free[0, 3]


def test_odd_sizes_take_the_lowest_free_slots():
    free = FreeGpus.from_snapshot(snapshot([], nodes(1, used={0: (0,)})), DecisionMemo())
    assert free.place(3, 1) == ("n0",)
    assert free.free[0].tolist() == [False, False, False, False, True, True, True, True]


def test_multi_node_jobs_fill_the_tightest_switch():
    # Switch 0 (n0-n3) has 3 empty nodes, switch 1 (n4-n7) has 2: a 2-node job goes to switch 1.
    used = {0: (0,), 6: (0,), 7: (0,)}
    free = FreeGpus.from_snapshot(snapshot([], nodes(8, used=used)), DecisionMemo())
    assert sorted(free.place(8, 2)) == ["n4", "n5"]


def test_a_job_that_cannot_fit_is_not_placed_and_changes_nothing():
    free = FreeGpus.from_snapshot(snapshot([], nodes(2, used={0: (0,), 1: (0,)})), DecisionMemo())
    before = free.free.copy()
    assert free.place(8, 1) is None
    assert np.array_equal(before, free.free)


def test_a_snapshot_keeping_unchanged_nodes_gives_the_same_free_gpus_as_a_fresh_read():
    first, memo = nodes(4, used={1: (0,)}), DecisionMemo()
    FreeGpus.from_snapshot(snapshot([], first), memo)
    changed = nodes(4, used={1: (0, 1, 2, 3, 4, 5, 6, 7), 2: (4, 5)})
    later = (first[0], changed[1], changed[2], first[3])  # a simulator keeps the unchanged Node objects
    updated = FreeGpus.from_snapshot(snapshot([], later), memo)
    fresh = FreeGpus._build(later, DecisionMemo())
    assert updated.names == fresh.names
    assert np.array_equal(updated.free, fresh.free) and np.array_equal(updated.free_count, fresh.free_count)
    assert np.array_equal(updated.switch, fresh.switch)


def test_fragmentation_is_the_share_of_free_gpus_on_partly_used_nodes():
    assert fragmentation(np.array([8, 8]), np.array([8, 8])) == 0.0
    assert fragmentation(np.array([1, 1, 0]), np.array([8, 8, 8])) == 1.0
    assert np.isclose(fragmentation(np.array([8, 2]), np.array([8, 8])), 0.2)


def test_a_node_whose_cpus_or_memory_other_jobs_hold_has_no_gpu_free_but_keeps_its_size():
    """Every job takes a CPU and some memory: n0's CPUs (n1's memory) all held by CPU jobs, no job
    starts there (seen on 24.11: GreenFlow placed a 1-GPU job on such a node and it waited)."""
    n0, n1, n2 = nodes(3, per_switch=1)
    full = (dataclasses.replace(n0, cpus_total=64, cpus_allocated=64),
            dataclasses.replace(n1, memory_total_mib=512000, memory_allocated_mib=512000),
            dataclasses.replace(n2, cpus_total=64, cpus_allocated=63, memory_total_mib=512000, memory_allocated_mib=1))
    assert [node.gpus_free for node in full] == [0, 0, 8]
    memo = DecisionMemo()
    free = FreeGpus.from_snapshot(snapshot([], full), memo)
    assert free.free_count.tolist() == [0, 0, 8] and gpus_free(full, memo) == 8
    assert free.place(1, 1) == ("n2",) and free.place(8, 1) is None
    assert snapshot([], full).gpus_total == 24  # held for now, not gone
