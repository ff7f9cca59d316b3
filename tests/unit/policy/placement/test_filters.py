from placement_literals import state
from slurm_green.policy.placement.filters import ResourceFit
from slurm_green.policy.placement.framework import Request


def test_a_node_fits_with_the_cpu_the_model_and_the_gpus():
    nodes = state([[1000, 1000], [1000, 400], [300, 300], [1000, 1000]], cpu=[8000, 8000, 8000, 1000],
                  model=[0, 0, 0, 1])
    fit = ResourceFit()
    assert fit.feasible(nodes, Request(2, cpu_milli=2000)).tolist() == [True, False, False, False]
    assert fit.feasible(nodes, Request(1, 400, cpu_milli=2000)).tolist() == [True, True, False, False]
    assert fit.feasible(nodes, Request(1, 200, models=frozenset({1}))).tolist() == [False, False, False, True]
    assert fit.feasible(nodes, Request(0, cpu_milli=4000)).tolist() == [True, True, True, False]
