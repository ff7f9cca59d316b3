import numpy as np

from placement_literals import state
from slurm_green.policy.placement.buddy import Buddy
from slurm_green.policy.placement.framework import Options, Request


def test_only_nodes_with_an_aligned_block_score():
    nodes = state([[0, 1000, 1000, 0], [0, 0, 1000, 1000]])  # both have 2 free GPUs, only n1 aligned
    options = Options(np.array([0, 1]), np.array([-1, -1]))
    assert Buddy().score(nodes, Request(2), options).tolist() == [0.0, 1.0]
    assert Buddy().score(nodes, Request(1, 500), Options(np.array([0]), np.array([1]))).tolist() == [0.0]
