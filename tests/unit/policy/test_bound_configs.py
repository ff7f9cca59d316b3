import numpy as np

from bound_literals import TableModels, table_jobs
from slurm_green.policy.bound_configs import ClusterShape, Keep, _lower_hull, candidates, layouts


def test_layouts_are_every_even_split_slurm_can_allocate_and_the_submitted_one():
    assert layouts(1, 2, 1, 1, gpus_per_node=8, max_nodes=2) == [(1, 1), (2, 1), (1, 2)]
    # 9 GPUs only as 3 x 3 within 4 nodes of 8; the submitted 8 x 2 is kept even outside the range.
    assert layouts(9, 9, 8, 2, gpus_per_node=8, max_nodes=4) == [(3, 3), (8, 2)]


def test_for_the_capacity_blind_bound_only_configurations_beaten_on_power_and_runtime_go():
    # The table model ignores nodes: 2 GPUs as 2 x 1 and as 1 x 2 are twins, one is kept. Of the four
    # others none has both less power and a shorter runtime than another.
    cand = candidates(table_jobs([0.0]), TableModels(), ClusterShape(2, {None: 2}), Keep.CARBON)
    assert sorted(zip(cand.gpus.tolist(), cand.power_w.tolist())) == [(1, 120.0), (1, 200.0), (2, 240.0), (2, 400.0)]
    np.testing.assert_allclose(sorted(cand.runtime_s), [4500.0, 5760.0, 7200.0, 9000.0])


def test_for_the_lp_a_configuration_a_mix_of_others_beats_goes():
    cost = np.array([[1, 1, 4], [4, 1, 1], [1, 4, 1], [2.5, 2.5, 2.5], [0.5, 3, 3]], dtype=float)
    # The fourth is worse on every axis than the mean of the first three (2, 2, 2).
    assert _lower_hull(cost).tolist() == [True, True, True, False, True]


def test_for_the_lp_degenerate_rows_are_all_kept():
    cost = np.array([[1, 2, 1], [2, 1, 2], [3, 0.5, 3], [4, 0.4, 4]], dtype=float)  # one plane: g/T = 1/T
    assert _lower_hull(cost).all()
