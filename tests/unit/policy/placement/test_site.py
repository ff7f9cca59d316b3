"""A site's placement weights choose a one-node job's node, in the scratch copy GreenFlow places on."""

from dataclasses import replace

import pytest

from policy_literals import LiteralModels, context, nodes, pending, signal, snapshot
from slurm_green.core.cluster import JobState
from slurm_green.core.decision import DecisionMemo
from slurm_green.policy.greenflow import GreenFlowPolicy
from slurm_green.policy.placement.network import FreeGpus
from slurm_green.policy.placement.site import ScoredChoice, check_weights

#: n0 has 1 GPU in use (7 free), n1 the first four (an aligned block of 4 left), n2 nothing.
USED = {0: (0,), 1: (0, 1, 2, 3)}


def placed(weights, jobs, gpus: int = 1):
    snap = snapshot(jobs, nodes(3, used=USED))
    free = FreeGpus.from_snapshot(snap, DecisionMemo())
    choose = ScoredChoice.for_pool(weights, snap, LiteralModels(), None) if weights else None
    return free.place(gpus, 1, choose=choose), free


def test_without_weights_a_one_gpu_job_takes_the_fullest_node():
    assert placed({}, [])[0] == ("n1",)


def test_fgd_keeps_the_block_the_workloads_four_gpu_jobs_need():
    """FGD's target workload is the pool's jobs: with 4-GPU jobs in it, one GPU taken from n1's
    last block of four would strand three; taken from n0 (7 free) it strands nothing."""
    fours = [pending(i, gpus=4) for i in range(2, 6)]
    nodes_, free = placed({"fgd": 1.0}, fours)
    assert nodes_ == ("n0",)
    assert free.free[1].tolist() == [False] * 4 + [True] * 4  # n1's block is whole
    assert placed({"fgd": 1.0}, [pending(i, gpus=1) for i in range(2, 6)])[0] != ("n2",)  # ones: no reason to wake n2


def test_pwr_never_wakes_an_idle_node_while_an_awake_one_has_room():
    # waking n2 costs its eight GPUs' idle power (8 x 50 W) on top of the job's; n0 and n1 only the job's
    assert placed({"pwr": 1.0}, [])[0] in (("n0",), ("n1",))
    assert placed({"pwr": 1.0}, [], gpus=8)[0] == ("n2",)  # the only node with eight free


def test_unknown_plugins_and_weights_that_choose_nothing_are_refused():
    with pytest.raises(ValueError, match="unknown placement plugin.*choose from packing"):
        check_weights({"fdg": 1.0})
    for bad in ({"pwr": -1.0, "fgd": 2.0}, {"pwr": 0.0}):
        with pytest.raises(ValueError, match="non-negative with a positive sum"):
            check_weights(bad)
    assert check_weights({}) == {}


def test_greenflow_places_one_node_jobs_by_the_sites_weights(models):
    """The same plan, two placements: by default the 1-GPU job goes to the fullest node (n1),
    with FGD to n0, since the 4-GPU job running on n1 says such jobs are the workload."""
    running = replace(pending(9, gpus=4), state=JobState.RUNNING, nodes=("n1",))
    snap = snapshot([running, pending(1, gpus=1)], nodes(3, used=USED))
    ctx = context(snap, signal([200.0] * 72), models)
    default = {d.job_id: d for d in GreenFlowPolicy()(ctx).decisions}
    scored = {d.job_id: d for d in GreenFlowPolicy(placement=(("fgd", 1.0),))(ctx).decisions}
    assert default[1].nodes == ("n1",) and scored[1].nodes == ("n0",)
    assert scored[1].gpus_per_node == default[1].gpus_per_node == 1
