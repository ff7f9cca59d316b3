"""The layer-freezing decision on synthetic histories with known answers."""

from __future__ import annotations

import math

import pytest

from slurm_green.train.freeze import converged, frozen_prefix, frozen_share

FLAT = [1.0, 1.0, 1.001, 1.0, 0.999]        # settled: moves 0.1 % per check
FALLING = [4.0, 2.0, 1.0, 0.5, 0.25]        # still halving


def decide(histories, **kw) -> int:
    return frozen_prefix(histories, **{"threshold": 0.01, "window": 3, "max_share": 0.9, **kw})


def test_a_layer_converges_only_when_every_recent_change_is_small() -> None:
    assert converged(FLAT, 0.01, 3)
    assert not converged(FALLING, 0.01, 3)
    assert not converged([5.0, 1.0, 1.0, 1.0], 0.01, 3)        # the jump is inside the window
    assert converged([5.0, 1.0, 1.0, 1.0, 1.0], 0.01, 3)       # and then outside it
    assert not converged([1.0, 1.0], 0.01, 3)                  # too short to tell
    assert not converged([1.0, math.nan, 1.0, 1.0], 0.01, 3)
    assert converged([0.0, 0.0, 0.0, 0.0], 0.01, 3) and not converged([0.0, 0.0, 0.0, 1e-9], 0.01, 3)


def test_only_the_converged_front_prefix_freezes() -> None:
    assert decide([FLAT, FLAT, FALLING, FLAT, FALLING]) == 2   # layer 3 settled, but behind a training one
    assert decide([FALLING, FLAT, FLAT, FLAT]) == 0


def test_the_last_layer_always_trains_and_the_bound_holds() -> None:
    assert decide([FLAT] * 4, max_share=1.0) == 3
    assert decide([FLAT] * 4, max_share=0.5) == 2
    assert decide([FLAT] * 4, max_share=0.49) == 1
    # weighted by cost: the first layer is 70 % of the compute, so a 0.5 bound freezes nothing
    assert decide([FLAT] * 3, max_share=0.5, costs=[7, 2, 1]) == 0
    assert decide([FLAT] * 3, max_share=0.9, costs=[7, 2, 1]) == 2
    assert frozen_share(2, [7, 2, 1]) == pytest.approx(0.9)


def test_frozen_layers_stay_frozen_whatever_their_history() -> None:
    assert decide([FALLING, FALLING, FLAT, FALLING], already=2) == 3
    assert decide([FALLING, FALLING, FALLING], already=1) == 1


def test_the_same_numbers_give_the_same_answer() -> None:
    histories = [[1.0 + 0.3 * 0.5 ** (t + i) for t in range(12)] for i in range(6)]
    answers = {decide(histories) for _ in range(5)}
    assert len(answers) == 1 and answers.pop() > 0


@pytest.mark.parametrize("kw", [dict(threshold=0), dict(window=0), dict(max_share=1.5), dict(already=4),
                                dict(costs=[1, 1]), dict(costs=[1, 0, 1, 1]), dict(max_share=0.2, already=1)])
def test_bad_arguments_are_refused(kw) -> None:
    with pytest.raises(ValueError):
        decide([FLAT] * 4, **kw)
