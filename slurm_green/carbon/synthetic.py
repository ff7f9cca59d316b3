"""A built-in, clearly labelled synthetic carbon source for demos and tests.

It needs no network and no files, and is deterministic: the same time always
gives the same value. Its daily shape has an obvious low-carbon window (a
solar dip around 12:00 UTC) and an evening peak, and weekends are a little
cleaner, so a carbon-aware policy visibly shifts work. Every consumer can see
``synthetic = True``, and the name ``synthetic`` appears in all outputs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.timebase import as_utc

BASE = 330.0  #: night-time level, gCO2eq/kWh
SOLAR_DIP = 190.0  #: depth of the midday dip
SOLAR_NOON_UTC = 12.5  #: hour of the lowest value
SOLAR_WIDTH = 2.6  #: hours (Gaussian sigma of the dip)
EVENING_PEAK = 45.0  #: extra at 19:00 UTC
WEEKEND_DISCOUNT = 30.0


def synthetic_intensity(index: pd.DatetimeIndex) -> np.ndarray:
    """The synthetic intensity (gCO2eq/kWh) at each UTC timestamp of ``index``."""
    hour = index.hour + index.minute / 60.0
    dip = SOLAR_DIP * np.exp(-0.5 * ((hour - SOLAR_NOON_UTC) / SOLAR_WIDTH) ** 2)
    peak = EVENING_PEAK * np.exp(-0.5 * ((hour - 19.0) / 1.5) ** 2)
    weekend = np.where(index.day_of_week >= 5, WEEKEND_DISCOUNT, 0.0)
    return np.asarray(BASE - dip + peak - weekend, dtype=np.float64)


class SyntheticSource(CarbonSource):
    """Deterministic synthetic intensity (labelled ``synthetic`` everywhere)."""

    synthetic = True

    def __init__(self, resolution: pd.Timedelta = pd.Timedelta(hours=1)) -> None:
        self.name = "synthetic"
        self.resolution = pd.Timedelta(resolution)

    def history(self, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
        start, end = as_utc(start).floor(self.resolution), as_utc(end)
        index = pd.date_range(start, max(end, start + self.resolution) - pd.Timedelta(1), freq=self.resolution)
        return pd.Series(synthetic_intensity(index), index=index, name="gco2_per_kwh")

    def forecast(self, horizon: pd.Timedelta, now: pd.Timestamp | None = None) -> pd.Series:
        now = as_utc(now)
        return self.history(now, now + horizon + pd.Timedelta(1))
