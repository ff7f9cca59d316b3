import numpy as np
import pytest

from bound_literals import TableModels, brute_force_schedule_kg, one_node, table_jobs
from policy_literals import signal
from slurm_green.policy.lower_bound import carbon_lower_bound
from slurm_green.policy.lp_bound import LpTooLarge, lp_lower_bound, slots

HOUR = 3600.0


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("coarse", [False, True])
def test_the_lp_is_at_most_every_feasible_schedule_two_jobs_two_gpus(seed, coarse):
    rng = np.random.default_rng(seed)
    forecast = signal(list(rng.integers(10, 500, size=6).astype(float)))
    jobs = table_jobs([0.0, float(rng.integers(0, 120))])
    # Coarse: every slot but the first two hours is a block of two periods at the least of them.
    slots_kw = {"fine_until": forecast.start + 2 * HOUR, "coarse_periods": 2} if coarse else {}
    lp = lp_lower_bound(jobs, forecast, TableModels(), one_node(2), **slots_kw)
    assert lp.carbon_kg <= brute_force_schedule_kg(forecast, jobs, 2, 15 * 60.0) * (1 + 1e-9)


def test_when_capacity_binds_the_lp_is_above_the_capacity_blind_bound_and_below_every_schedule():
    # Three one-GPU jobs of two hours at least on one GPU, one clean stretch: only one job gets it.
    forecast = signal([500.0, 10.0, 10.0, 500.0, 500.0, 500.0, 500.0, 500.0])
    jobs = table_jobs([0.0, 0.0, 0.0], low=1, high=1)
    lp = lp_lower_bound(jobs, forecast, TableModels(), one_node(1))
    blind = carbon_lower_bound(jobs, forecast, TableModels(), one_node(1))
    assert lp.carbon_kg > 1.5 * blind.carbon_kg
    assert lp.carbon_kg <= brute_force_schedule_kg(forecast, jobs, 1, 30 * 60.0) * (1 + 1e-9)


def test_a_job_cannot_pause_below_its_own_bound():
    # A two-hour job with clean hours apart: the relaxation alone would run it in both (0 kg); the job's
    # capacity-blind bound as the floor of its carbon makes it pay for a dirty hour as a real run must.
    forecast = signal([500.0, 0.0, 500.0, 0.0, 500.0, 500.0])
    jobs = table_jobs([0.0], low=1, high=1)
    lp = lp_lower_bound(jobs, forecast, TableModels(), one_node(1))
    blind = carbon_lower_bound(jobs, forecast, TableModels(), one_node(1))
    assert blind.carbon_kg > 0.05 and lp.carbon_kg == pytest.approx(blind.carbon_kg, rel=1e-7)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("coarse_periods", [1, 6])
def test_the_lp_is_never_below_the_capacity_blind_bound(seed, coarse_periods):
    rng = np.random.default_rng(seed)
    forecast = signal(list(rng.integers(10, 500, size=24).astype(float)))
    jobs = table_jobs(sorted(rng.integers(0, 600, size=4).astype(float)))
    lp = lp_lower_bound(jobs, forecast, TableModels(), one_node(2), fine_until=forecast.start,
                        coarse_periods=coarse_periods)
    blind = carbon_lower_bound(jobs, forecast, TableModels(), one_node(2))
    assert lp.carbon_kg >= blind.carbon_kg * (1 - 1e-7)


def test_coarse_slots_take_their_least_period_and_the_tail_holds_the_last_value():
    forecast = signal([5.0, 4.0, 3.0, 9.0, 8.0, 1.0, 6.0, 7.0])
    grid = slots(forecast, forecast.start, forecast.start + 2 * HOUR, 3)
    np.testing.assert_allclose(grid.intensity, [5.0, 4.0, 3.0, 1.0, 7.0])
    np.testing.assert_allclose(grid.length, [HOUR, HOUR, 3 * HOUR, 3 * HOUR, np.inf])


def test_it_refuses_an_lp_above_its_size_limit():
    with pytest.raises(LpTooLarge, match="variables"):
        lp_lower_bound(table_jobs([0.0, 1.0]), signal([1.0] * 24), TableModels(), one_node(2), max_variables=10)
