import numpy as np
import pytest

from placement_literals import state
from slurm_green.policy.placement.fgd import Fgd, Workload
from slurm_green.policy.placement.framework import Options, Request

# Half the tasks want half a GPU, half a whole GPU.
WORKLOAD = Workload.from_requests([Request(1, 500), Request(1, 1000)], models=1)


def test_fragmentation_counts_what_each_task_class_could_not_use():
    # [1000, 600]: the half-GPU task fits on either GPU (nothing fragmented); the whole-GPU task
    # only on GPU 0, so GPU 1's 600 are fragmented for it: 0.5 * 0 + 0.5 * 600.
    assert WORKLOAD.fragmentation(np.array([[1000, 600]]), np.array([1 << 30]), np.array([0])).tolist() == [300.0]
    # A task that cannot run at all (not enough CPU) leaves every free GPU fragmented.
    cpu_bound = Workload.from_requests([Request(1, 500, cpu_milli=4000)], models=1)
    assert cpu_bound.fragmentation(np.array([[1000, 600]]), np.array([2000]), np.array([0])).tolist() == [1600.0]


def test_fgd_shares_the_gpu_whose_leftover_fragments_least():
    nodes = state([[1000, 600]])
    # On GPU 0 -> [500, 600]: the whole-GPU task no longer fits, F = 0.5 * 1100 = 550 (+250).
    # On GPU 1 -> [1000, 100]: F = 0.5 * 100 + 0.5 * 100 = 100 (-200).
    options = Options(np.array([0, 0]), np.array([0, 1]))
    assert Fgd(WORKLOAD, levels=None).score(nodes, Request(1, 500), options).tolist() == [-250.0, 200.0]
    # The authors' integer scale: int(100 * sigmoid(decrease / 1000)).
    assert Fgd(WORKLOAD).score(nodes, Request(1, 500), options).tolist() == [43.0, 54.0]


def test_on_the_integer_scale_nearly_equal_increases_tie():
    nodes = state([[1000, 700], [1000, 690]])  # decreases 150 and 155 milli: both 53
    options = Options(np.array([0, 1]), np.array([1, 1]))
    exact = Fgd(WORKLOAD, levels=None).score(nodes, Request(1, 500), options)
    assert exact[0] != exact[1]
    assert len(set(Fgd(WORKLOAD).score(nodes, Request(1, 500), options).tolist())) == 1


def test_identical_nodes_score_identically():
    nodes = state([[1000, 1000], [1000, 1000], [1000, 400]])
    scores = Fgd(WORKLOAD).score(nodes, Request(1), Options(np.array([0, 1, 2]), np.array([-1, -1, -1])))
    assert scores[0] == scores[1]


def test_a_workload_without_gpu_tasks_is_refused():
    with pytest.raises(ValueError, match="no GPU task"):
        Workload.from_requests([Request(0, cpu_milli=1000)], models=1)


def test_class_shares_and_model_access_come_from_the_tasks():
    w = Workload.from_requests([Request(1, 500, models=frozenset({1}))] * 3 + [Request(2)], models=2)
    assert sorted(w.prob.tolist()) == [0.25, 0.75]
    assert w.access[:, int(np.argmax(w.prob))].tolist() == [False, True]
