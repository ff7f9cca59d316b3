import numpy as np

from placement_literals import IDLE, state
from slurm_green.policy.placement.best_fit import BestFit
from slurm_green.policy.placement.framework import Options, Request


def test_the_node_left_with_least_free_wins_and_inside_it_the_tightest_gpu():
    nodes = state([IDLE, [1000, 500, 300, 1000]], cpu=[8000, 8000])
    plugin = BestFit(cpu_scale_milli=8000, gpu_scale_milli=4000)
    whole = plugin.score(nodes, Request(1, cpu_milli=2000), Options(np.array([0, 1]), np.array([-1, -1])))
    # n0 leaves 0.5*6000/8000 + 0.5*3000/4000 = 0.75 free; n1 0.375 + 0.5*1800/4000 = 0.6.
    assert np.allclose(whole, [-0.75, -0.6])
    share = plugin.score(nodes, Request(1, 200), Options(np.array([1, 1]), np.array([1, 2])))
    assert share[1] > share[0]
