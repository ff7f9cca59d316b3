import numpy as np
import pytest

from bound_literals import TableModels, brute_force_job_kg, one_node, table_jobs
from policy_literals import signal
from slurm_green.policy.lower_bound import carbon_lower_bound


def test_a_faster_configuration_in_a_trough_beats_the_least_energy_one():
    # The least-energy configuration (1 GPU at cap 0.5) needs 150 min; 2 GPUs at full power need
    # 75 min, most of it in the one clean hour: less carbon for 67 % more energy.
    forecast = signal([400.0, 400.0, 20.0, 400.0, 400.0, 400.0])
    bound = carbon_lower_bound(table_jobs([0.0]), forecast, TableModels(), one_node(2))
    fast = 400.0 * (3600 * 20.0 + 900 * 400.0) / 3.6e9
    least_energy = 120.0 * (3600 * 20.0 + 5400 * 400.0) / 3.6e9
    assert bound.carbon_kg == pytest.approx(fast) and fast < 0.7 * least_energy


@pytest.mark.parametrize("seed", range(5))
def test_each_job_gets_the_brute_force_minimum_over_every_configuration_and_start(seed):
    rng = np.random.default_rng(seed)
    forecast = signal(list(rng.integers(10, 500, size=6).astype(float)))
    submits = sorted(rng.integers(0, 5 * 60, size=3).astype(float))  # whole minutes, anywhere in the series
    bound = carbon_lower_bound(table_jobs(submits), forecast, TableModels(), one_node(2))
    want = [brute_force_job_kg(forecast, float(s), 1, 2) for s in table_jobs(submits).submit]
    np.testing.assert_allclose(bound.per_job_kg, want, rtol=1e-9)
    assert bound.carbon_kg == pytest.approx(sum(want))


def test_a_job_submitted_after_the_series_runs_at_its_last_value():
    forecast = signal([10.0, 500.0])
    bound = carbon_lower_bound(table_jobs([600.0]), forecast, TableModels(), one_node(2))
    assert bound.carbon_kg == pytest.approx(min(p * 7200 / t for t, p in [(1.0, 200.0), (0.8, 120.0), (1.6, 400.0),
                                                                          (1.25, 240.0)]) * 500.0 / 3.6e9)
