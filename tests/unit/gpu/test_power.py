"""cap_watts: a fraction of the board maximum, clamped to the board's range."""

from __future__ import annotations

import pytest

from slurm_green.gpu.power import BoardLimits, cap_watts

A100 = BoardLimits(min_w=100, max_w=400, default_w=400, current_w=400)


@pytest.mark.parametrize(("fraction", "watts"), [(0.7, 280), (1.0, 400), (1.5, 400), (0.1, 100), (0.6667, 267)])
def test_cap_is_fraction_of_max_clamped(fraction: float, watts: float) -> None:
    assert cap_watts(fraction, A100) == watts


@pytest.mark.parametrize("fraction", [0, -0.5, float("nan"), float("inf"), True, "0.5", None])
def test_nonsense_fractions_are_refused(fraction: object) -> None:
    with pytest.raises(ValueError):
        cap_watts(fraction, A100)  # type: ignore[arg-type]
