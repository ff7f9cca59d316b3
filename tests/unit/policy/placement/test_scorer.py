import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_literals import IDLE, state
from slurm_green.policy.placement.fgd import Workload
from slurm_green.policy.placement.filters import ResourceFit
from slurm_green.policy.placement.framework import MILLI, Request
from slurm_green.policy.placement.scorer import PLUGINS, SCORERS, Context, Scorer, normalised

WORKLOAD = Workload.from_requests([Request(1, 500), Request(1, 1000), Request(2)], models=1)


def context(nodes):
    return Context(nodes, WORKLOAD, np.array([50.0]), np.array([250.0]), seed=1)


def test_scores_are_normalised_to_the_unit_interval_and_equal_scores_count_fully():
    assert normalised(np.array([-4.0, 0.0, 4.0])).tolist() == [0.0, 0.5, 1.0]
    assert normalised(np.array([7.0, 7.0])).tolist() == [1.0, 1.0]


def test_an_unknown_plugin_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown placement plugin.*choose from packing, best_fit"):
        Scorer.from_weights({"fdg": 1.0}, context(state([IDLE])))
    with pytest.raises(ValueError, match="needs the target workload"):
        Scorer.from_weights({"fgd": 1.0}, Context(state([IDLE])))


def test_weights_decide_between_power_and_fragmentation():
    # n0 asleep with 4 GPUs; n1 busy with 2 GPUs free. A half-GPU task: PWR takes n1 (nothing to
    # wake), but there it leaves no 2 whole GPUs for a third of the workload (F +667); on n0 three
    # whole GPUs remain (F +333), so FGD wakes n0.
    nodes = state([[1000] * 4, [1000, 1000, 0, 0]])
    assert Scorer.from_weights({"pwr": 1.0}, context(nodes)).choose(nodes, Request(1, 500)) == (1, 0)
    assert Scorer.from_weights({"fgd": 1.0}, context(nodes)).choose(nodes, Request(1, 500))[0] == 0


def test_nothing_fits_means_no_choice_and_no_change():
    nodes = state([[300, 0]])
    assert Scorer.from_weights({"packing": 1.0}, context(nodes)).place(nodes, Request(1, 500)) is None
    assert nodes.gpu_free.tolist() == [[300, 0]]


requests = st.one_of(st.builds(Request, st.just(1), st.integers(50, 999), st.integers(0, 8000)),
                     st.builds(Request, st.sampled_from([0, 1, 2, 4, 8]), st.just(MILLI), st.integers(0, 8000)))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(SCORERS)), st.lists(requests, min_size=1, max_size=40))
def test_placement_never_exceeds_capacity_nor_ignores_the_filter(name, tasks):
    nodes = state([[MILLI] * 8, [MILLI] * 8, [MILLI] * 4, [MILLI] * 2], cpu=[32_000, 16_000, 16_000, 8000])
    scorer = Scorer.from_weights(SCORERS[name], context(nodes))
    for task in tasks:
        fits = ResourceFit().feasible(nodes, task)
        placed = scorer.place(nodes, task)
        assert (placed is None) == (not fits.any())
        if placed is not None:
            assert fits[placed[0]] and len(placed[1]) == task.gpus
        assert (nodes.gpu_free >= 0).all() and (nodes.gpu_free <= MILLI).all() and (nodes.cpu_free >= 0).all()
        assert (nodes.gpu_free[~nodes.gpu_exists] == 0).all()


def test_every_plugin_is_buildable_from_a_full_context():
    nodes = state([IDLE])
    for name in PLUGINS:
        assert Scorer.from_weights({name: 1.0}, context(nodes)).choose(nodes, Request(1)) == (0, -1)
