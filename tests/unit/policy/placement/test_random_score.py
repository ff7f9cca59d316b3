import numpy as np

from placement_literals import IDLE, state
from slurm_green.policy.placement.framework import Options, Request
from slurm_green.policy.placement.random_score import RandomScore


def test_random_scores_are_reproducible_per_seed():
    nodes, options = state([IDLE] * 5), Options(np.arange(5), np.full(5, -1))
    first = RandomScore(3).score(nodes, Request(1), options)
    assert np.array_equal(first, RandomScore(3).score(nodes, Request(1), options))
    assert not np.array_equal(first, RandomScore(4).score(nodes, Request(1), options))
