from __future__ import annotations

import itertools

import numpy as np
import pytest

from slurm_green.models.profiles import ScalingRow
from slurm_green.models.scaling import ScalingParams, fit_scaling, nnls


def test_nnls_matches_a_brute_force_grid() -> None:
    rng = np.random.default_rng(1)
    design, target = rng.normal(size=(12, 3)), rng.normal(size=12)
    sol = nnls(design, target)
    grid = np.linspace(0, 2, 41)
    best = min(float(np.sum((design @ np.array(x) - target) ** 2)) for x in itertools.product(grid, repeat=3))
    assert (sol >= 0).all()
    assert float(np.sum((design @ sol - target) ** 2)) <= best + 1e-9


def test_fit_recovers_the_coefficients_that_generated_the_rows() -> None:
    truth = ScalingParams(a=0.1, b=0.03, a_net=0.4, b_net=0.05)
    rows = [ScalingRow(g, n, 10.0 * truth.speedup(g, n)) for g in (1, 2, 3, 4, 8, 12, 16) for n in (1, 2, 3, 4)
            if n <= g and (n == 1 or g >= 2)]
    fitted = fit_scaling(rows, 10.0)
    for name in ("a", "b", "a_net", "b_net"):
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), abs=1e-9)


def test_super_linear_measurements_are_capped_at_linear_scaling() -> None:
    rows = [ScalingRow(1, 1, 10.0), ScalingRow(2, 1, 25.0), ScalingRow(4, 1, 45.0)]
    assert fit_scaling(rows, 10.0).speedup(4) == pytest.approx(4.0)
