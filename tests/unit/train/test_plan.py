"""The data order is the job's, not the world's: any world size trains on the same samples per step."""

from __future__ import annotations

import pytest

from slurm_green.train.plan import BatchPlan, accumulation


def step_samples(plan: BatchPlan, start: int, global_batch: int, world: int) -> list[list[int]]:
    """Each rank's samples of one step, micro-batches joined."""
    return [[i for micro in plan.micro_batches(start, global_batch, rank, world) for i in micro]
            for rank in range(world)]


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_every_world_splits_the_same_global_batch_without_overlap(world: int) -> None:
    plan = BatchPlan(100, micro_batch=8, seed=3)
    for start in (0, 24, 96, 1000):  # 96: the step crosses into the next epoch
        shares = step_samples(plan, start, 24, world)
        assert sorted(i for share in shares for i in share) == sorted(plan.indices(start, 24))
        assert all(abs(len(a) - len(b)) <= 1 for a in shares for b in shares)


def test_each_epoch_is_a_seeded_permutation() -> None:
    plan = BatchPlan(50, micro_batch=10, seed=7)
    first, second = plan.indices(0, 50), plan.indices(50, 50)
    assert sorted(first) == sorted(second) == list(range(50)) and first != second
    assert BatchPlan(50, 10, seed=7).indices(0, 120) == first + second + plan.indices(100, 20)
    assert BatchPlan(50, 10, seed=8).indices(0, 50) != first


def test_micro_batches_fit_and_accumulation_counts_them() -> None:
    plan = BatchPlan(1000, micro_batch=32, seed=0)
    assert [len(m) for m in plan.micro_batches(0, 128, 0, 1)] == [32, 32, 32, 32]
    assert [len(m) for m in plan.micro_batches(0, 128, 1, 3)] == [32, 11]
    assert (accumulation(128, 32, 1), accumulation(128, 32, 2), accumulation(128, 32, 3)) == (4, 2, 2)


def test_impossible_plans_are_refused() -> None:
    with pytest.raises(ValueError, match="micro_batch"):
        BatchPlan(10, micro_batch=0)
    with pytest.raises(ValueError, match="world <= global batch"):
        BatchPlan(10, 2).micro_batches(0, 2, 0, 4)
