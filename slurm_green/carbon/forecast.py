"""The built-in forecaster for sources that publish no forecast.

Grid intensity has a strong daily shape (solar, demand) and a weaker weekly
one, while its level wanders with the weather for hours to days. The forecast
is therefore a *seasonal profile* (a recency-weighted mean of the same time of
day over the last days, blended with the same time last week) plus the
*current anomaly* (latest value minus the profile now), which decays from the
latest value toward the profile over the horizon (half-life 24 h: level
shifts often outlast a day).

Only data up to the forecast origin is used. The numeric core
(:meth:`SeasonalForecaster.predict`) works on plain arrays so the benchmark
can run it at every hour of a year; :meth:`SeasonalForecaster.forecast` is the
pandas entry point used by sources.
Parameters were tuned on January-June 2023 of the shared regions;
``benchmarks/carbon_forecast.py`` reports July-December separately as a hold-out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from slurm_green.carbon.errors import GapError, StaleDataError
from slurm_green.carbon.timebase import floor_on

ONE_DAY = pd.Timedelta(days=1)


@dataclass(frozen=True)
class SeasonalForecaster:
    """Seasonal day/week profile blended with a decaying latest-value anomaly."""

    days: int = 14  #: days of history in the daily profile
    day_weight_ratio: float = 0.5  #: weight of a day relative to the next more recent one
    weekly_weight: float = 0.2  #: share of "same time last week" in the profile
    half_life_hours: float = 24.0  #: half-life of the current anomaly
    anomaly_floor: float = 0.0  #: share of the anomaly that never decays (tuning chose none)
    max_lag: pd.Timedelta = pd.Timedelta(hours=6)  #: oldest acceptable last data point

    def predict(self, past: np.ndarray, steps_per_day: int, horizon_steps: int) -> np.ndarray:
        """Forecast ``horizon_steps + 1`` values; element 0 is the origin period (``past[-1]``).

        ``past`` holds regular values ending at the origin; NaN marks missing data.
        """
        past = np.asarray(past, dtype=np.float64)
        latest = past[-1]
        if not np.isfinite(latest):
            raise GapError("forecast origin has no value")
        steps = np.arange(horizon_steps + 1)
        profile = self._profile(past, steps_per_day, steps)
        anomaly = latest - profile[0]
        step_hours = 24.0 / steps_per_day
        decay = 0.5 ** (steps * step_hours / self.half_life_hours)
        keep = self.anomaly_floor + (1.0 - self.anomaly_floor) * decay
        return np.maximum(profile + anomaly * keep, 0.0)

    def forecast(self, past: pd.Series, *, now: pd.Timestamp, horizon: pd.Timedelta) -> pd.Series:
        """Forecast from the period containing ``now`` to ``now + horizon`` from a validated series.

        If the newest point is a little older than ``now`` (providers lag), the
        forecast starts from it and the lag is bridged by the model.
        """
        past = past.loc[:now].dropna()
        if past.empty:
            raise GapError("no history before the forecast origin")
        step = pd.Timedelta(past.index.freq or pd.Series(past.index).diff().median())
        origin = past.index[-1]
        if now - origin > self.max_lag:
            raise StaleDataError(f"newest history point {origin} is more than {self.max_lag} before {now}")
        steps_per_day = int(ONE_DAY / step)
        regular = past.reindex(pd.date_range(past.index[0], origin, freq=step))
        first = floor_on(now, step, origin)  # the period holding now, on the data's own grid
        target_end = first + horizon
        horizon_steps = int(np.ceil((target_end - origin) / step))
        values = self.predict(regular.to_numpy(), steps_per_day, max(horizon_steps, 0))
        index = pd.date_range(origin, periods=len(values), freq=step)
        out = pd.Series(values, index=index, name="gco2_per_kwh")
        return out.loc[first:]

    def _profile(self, past: np.ndarray, steps_per_day: int, steps: np.ndarray) -> np.ndarray:
        """Seasonal expectation for each future step (0 = origin), from data up to the origin."""
        need = self.days * steps_per_day
        window = past[-need:]
        if len(window) < need:
            window = np.concatenate((np.full(need - len(window), np.nan), window))
        by_day = window.reshape(self.days, steps_per_day)  # last column = origin's time of day
        weights = self.day_weight_ratio ** np.arange(self.days - 1, -1, -1, dtype=np.float64)
        known = np.isfinite(by_day)
        total = (np.where(known, by_day, 0.0) * weights[:, None]).sum(axis=0)
        weight = (known * weights[:, None]).sum(axis=0)
        daily = np.divide(total, weight, out=np.full(steps_per_day, np.nan), where=weight > 0)
        profile = daily[(steps_per_day - 1 + steps) % steps_per_day]
        week_ago_pos = len(past) - 1 + steps - 7 * steps_per_day
        week_ago = np.full(len(steps), np.nan)
        ok = (week_ago_pos >= 0) & (week_ago_pos < len(past))
        week_ago[ok] = past[week_ago_pos[ok]]
        blended = np.where(
            np.isfinite(week_ago), (1 - self.weekly_weight) * profile + self.weekly_weight * week_ago, profile
        )
        # Where history has no value for a time of day, the latest value is the best guess.
        return np.where(np.isfinite(blended), blended, past[-1])
