import numpy as np

from policy_literals import HOUR, NOW, LiteralModels, SublinearModel, signal
from slurm_green.core.models import Config
from slurm_green.policy.lower_bound import carbon_lower_bound


def test_lower_bound_is_least_energy_in_the_cleanest_window():
    forecast = signal([500.0] * 5 + [50.0] * 2 + [500.0] * 200)
    model = SublinearModel()
    work = model.throughput(Config(1)) * HOUR  # one GPU-hour at full power
    bound = carbon_lower_bound(np.array([NOW]), np.array([work]), ["x"], np.array([2]), np.array([1]),
                               np.array([4]), forecast, LiteralModels(), 8, horizon_s=24 * HOUR,
                               caps=(0.5, 1.0))
    best_kwh = work * model.power_w(Config(1, 1, 0.5)) / model.throughput(Config(1, 1, 0.5)) / 3.6e6
    runtime = work / model.throughput(Config(1, 1, 0.5))
    assert runtime <= 2 * HOUR  # fits in the clean window
    assert np.isclose(bound.energy_kwh, best_kwh)
    assert np.isclose(bound.carbon_kg, best_kwh * 50.0 / 1000.0)


def test_a_short_horizon_cannot_reach_the_clean_window():
    forecast = signal([500.0] * 5 + [50.0] * 2 + [500.0] * 200)
    model = SublinearModel()
    work = np.array([model.throughput(Config(1)) * HOUR])
    args = (np.array([NOW]), work, ["x"], np.array([1]), np.array([1]), np.array([1]), forecast, LiteralModels(), 8)
    assert carbon_lower_bound(*args, horizon_s=2 * HOUR).carbon_kg > carbon_lower_bound(*args, horizon_s=24 * HOUR).carbon_kg
