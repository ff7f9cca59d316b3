import numpy as np

from placement_literals import state
from slurm_green.policy.placement.framework import Options, Request
from slurm_green.policy.placement.pwr import Pwr, node_power_w

PWR = Pwr(idle_w_by_model=np.array([50.0]), max_w_by_model=np.array([250.0]))


def test_a_sleeping_node_draws_nothing_a_busy_one_idle_plus_its_share_of_dynamic_power():
    nodes = state([[1000, 1000], [1000, 500], [0, 1000]])
    assert PWR.power_w(nodes).tolist() == [0.0, 50.0 + 150.0, 250.0 + 50.0]
    assert node_power_w(np.array([[0, 0]]), np.array([[True, True]]), np.array([50.0]), np.array([250.0]),
                        node_w=100.0).tolist() == [0.0]


def test_waking_a_node_costs_more_than_adding_to_a_busy_one():
    nodes = state([[1000, 1000], [1000, 500]])
    options = Options(np.array([0, 1, 1]), np.array([0, 0, 1]))
    # Node 0 wakes: both GPUs idle (100 W) + 0.2 x 200 W dynamic; node 1: only the 40 W dynamic.
    assert PWR.score(nodes, Request(1, 200), options).tolist() == [-140.0, -40.0, -40.0]
    whole = PWR.score(nodes, Request(1), Options(np.array([0, 1]), np.array([-1, -1])))
    assert whole.tolist() == [-300.0, -200.0]
