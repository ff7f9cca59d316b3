import numpy as np

from placement_literals import IDLE, state
from slurm_green.policy.placement.framework import Options, Request
from slurm_green.policy.placement.packing import Packing


def test_a_shared_gpu_beats_a_free_gpu_on_a_used_node_which_beats_an_idle_node():
    nodes = state([[1000, 300, 1000, 1000], IDLE, [1000, 600, 1000, 1000]])
    options = Options(np.array([0, 0, 1, 2]), np.array([1, 0, 0, 1]))
    scores = Packing().score(nodes, Request(1, 200), options)
    # shared GPU with 300 free: 100 - 3 = 97; 600 free: 100 - 6 = 94; free GPU of a used node 49; idle 4-GPU node 29.
    assert scores.tolist() == [97.0, 49.0, 29.0, 94.0]


def test_whole_gpus_go_to_a_used_node_before_an_idle_one():
    nodes = state([IDLE, [0, 1000, 1000, 1000]])
    assert Packing().score(nodes, Request(2), Options(np.array([0, 1]), np.array([-1, -1]))).tolist() == [29.0, 48.0]
