"""The built-in forecaster: exact on pure patterns, causal, and better than naive baselines on real data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slurm_green.carbon.errors import StaleDataError
from slurm_green.carbon.files import read_carbon_csv
from slurm_green.carbon.forecast import SeasonalForecaster

DAILY = 200 + 100 * np.sin(np.arange(24) / 24 * 2 * np.pi)


def test_a_pure_daily_pattern_is_forecast_exactly():
    past = np.tile(DAILY, 21)
    predicted = SeasonalForecaster().predict(past, 24, 48)
    np.testing.assert_allclose(predicted, np.tile(DAILY, 3)[23:72], rtol=1e-12)


def test_a_level_shift_decays_from_the_latest_value_toward_the_profile():
    past = np.full(21 * 24, 300.0)
    past[-1] = 400.0  # sudden jump at the origin
    predicted = SeasonalForecaster().predict(past, 24, 48)
    assert predicted[0] == 400.0
    assert np.all(np.diff(predicted[:24]) <= 1e-9)  # decays through the first day
    assert 300.0 < predicted[23] < 350.0
    # The jump also entered the profile for its time of day, so it echoes a day later, damped.
    assert 300.0 < predicted[24] < 400.0 and predicted[47] < predicted[23]


def test_missing_history_is_skipped_not_used():
    past = np.tile(DAILY, 14)
    past[24:100] = np.nan
    np.testing.assert_allclose(SeasonalForecaster().predict(past, 24, 24), np.tile(DAILY, 2)[23:48], rtol=1e-12)


def test_pandas_entry_point_bridges_a_small_provider_lag_and_refuses_a_big_one():
    index = pd.date_range("2024-01-01", periods=14 * 24, freq="h", tz="UTC")
    past = pd.Series(np.tile(DAILY, 14), index=index)
    past.index.freq = "h"
    now = index[-1] + pd.Timedelta(hours=2, minutes=10)
    out = SeasonalForecaster().forecast(past, now=now, horizon=pd.Timedelta(hours=24))
    assert out.index[0] == now.floor("h") and out.index[-1] >= now + pd.Timedelta(hours=23)
    with pytest.raises(StaleDataError):
        SeasonalForecaster().forecast(past, now=index[-1] + pd.Timedelta(hours=30), horizon=pd.Timedelta(hours=24))


def mape(pred: np.ndarray, actual: np.ndarray) -> float:
    ok = actual >= 1.0
    return float(np.mean(np.abs(pred[ok] - actual[ok]) / actual[ok]))


def test_beats_persistence_and_day_ago_on_most_real_regions(carbon_csvs):
    """Rolling origin every 25 h over 2023 (a stride that visits every hour of day), causal forecasts only."""
    wins = 0
    for path in carbon_csvs.values():
        values = read_carbon_csv(path).to_numpy()
        origins = range(14 * 24, len(values) - 24, 25)
        actual = np.stack([values[o + 1 : o + 25] for o in origins])
        ours = np.stack([SeasonalForecaster().predict(values[: o + 1], 24, 24)[1:] for o in origins])
        persistence = np.stack([np.full(24, values[o]) for o in origins])
        day_ago = np.stack([values[o - 23 : o + 1] for o in origins])
        wins += mape(ours, actual) < min(mape(persistence, actual), mape(day_ago, actual))
    assert wins >= 0.75 * len(carbon_csvs)
