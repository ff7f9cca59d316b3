import numpy as np
import pytest

from policy_literals import NOW, signal
from slurm_green.policy.least_window import least_integrals

MINUTE = 60.0


def brute_force(forecast, earliest: float, runtime: float) -> float:
    """Every whole-minute start from ``earliest`` to a day past the series' end, by the signal's own mean."""
    starts = np.arange(earliest, forecast.end + 24 * 3600.0, MINUTE)
    return float((forecast.mean_over(starts, starts + runtime) * runtime).min())


@pytest.mark.parametrize("seed", range(6))
def test_the_least_integral_is_the_brute_force_minimum_over_whole_minute_starts(seed):
    rng = np.random.default_rng(seed)
    forecast = signal(list(rng.integers(10, 500, size=12).astype(float)))
    # Whole minutes: every kink of a window's integral lies on the brute force's grid. Earliest starts
    # before, inside and after the series; runtimes from minutes to longer than the series.
    earliest = NOW + rng.integers(-120, 14 * 60, size=40) * MINUTE
    runtime = rng.integers(1, 16 * 60, size=40) * MINUTE
    got = least_integrals(forecast, earliest, runtime)
    want = [brute_force(forecast, a, r) for a, r in zip(earliest, runtime)]
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_a_run_shorter_than_a_period_finds_the_clean_hour_and_a_longer_one_straddles_it():
    forecast = signal([300.0, 300.0, 10.0, 300.0, 300.0])
    got = least_integrals(forecast, np.array([NOW, NOW, NOW + 3 * 3600.0]), np.array([1800.0, 5400.0, 1800.0]))
    # Half an hour inside the clean hour; 1.5 h as 1 h clean + 0.5 h dirty; after it only 300 is left.
    np.testing.assert_allclose(got, [10.0 * 1800, 10.0 * 3600 + 300.0 * 1800, 300.0 * 1800])
