"""The one interface every carbon-intensity source implements.

A source answers three questions, always in gCO2eq/kWh on a regular UTC
DatetimeIndex at the source's fixed ``resolution``:

- :meth:`CarbonSource.latest`: the current value (a :class:`Reading`);
- :meth:`CarbonSource.history`: measured values over ``[start, end)``;
- :meth:`CarbonSource.forecast`: values from the period containing ``now``
  to at least ``now + horizon``. The first value is the best estimate of now.

Sources raise :class:`~slurm_green.carbon.errors.CarbonError` subclasses and
never return unvalidated numbers. Calls may block on the network: the
controller never calls a source directly, it reads a
:class:`~slurm_green.carbon.feed.CarbonFeed` that calls sources in a
background thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import pandas as pd

from slurm_green.carbon.answer import Answer
from slurm_green.carbon.errors import CarbonUnavailable, DataValidationError, GapError
from slurm_green.carbon.forecast import SeasonalForecaster
from slurm_green.carbon.timebase import as_utc


@dataclass(frozen=True)
class Reading:
    """One carbon-intensity value: the period it starts, its value, and who said so."""

    time: pd.Timestamp
    value: float
    source: str


class CarbonSource(ABC):
    """A provider of carbon intensity (file, live API, synthetic, or a fallback chain).

    Subclasses set ``name`` (the spec that built them, for logs), ``resolution``
    and ``synthetic`` (true only for made-up data, so that every display can say so).
    """

    name: str
    resolution: pd.Timedelta
    synthetic: bool = False
    #: How much history the default model forecast learns from.
    forecast_training: pd.Timedelta = pd.Timedelta(days=14)

    @abstractmethod
    def history(self, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
        """Measured intensity over ``[start, end)``, validated."""

    def latest(self, now: pd.Timestamp | None = None) -> Reading:
        """The value of the period containing ``now`` (default: the first forecast value)."""
        series = self.forecast(pd.Timedelta(0), now=now)
        return Reading(series.index[0], float(series.iloc[0]), self.name)

    def forecast(self, horizon: pd.Timedelta, now: pd.Timestamp | None = None) -> pd.Series:
        """Intensity from the period containing ``now`` to at least ``now + horizon``.

        The default, for sources that publish no forecast, is the built-in
        :class:`SeasonalForecaster` fitted on recent history (no future data).
        """
        now = as_utc(now)
        past = self.history(now - self.forecast_training, now + self.resolution)
        return SeasonalForecaster().forecast(past, now=now, horizon=horizon)

    def answer(self, horizon: pd.Timedelta, now: pd.Timestamp | None = None) -> Answer:
        """The forecast with its provenance (a chain says which member answered).

        The forecast is checked here, once for every source, to be what the
        controller's signal needs: a source whose numbers cannot be used fails
        *as a source*, so a fallback chain moves on to the next one instead of
        the feed failing after the chain has chosen.
        """
        return Answer(usable_forecast(self.forecast(horizon, now=now), self.name), self.name, self.synthetic)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class NoCarbonSource(CarbonSource):
    """No source configured: every question is answered with :class:`CarbonUnavailable`.

    It stands where a source would, so a controller without one is built and run
    like any other and is carbon-agnostic by the same path as when every
    configured source fails (deferred jobs are released), saying why.
    """

    name = "none"
    resolution = pd.Timedelta(hours=1)
    REASON = "no carbon source configured ([carbon] sources is empty): carbon-agnostic"

    def history(self, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
        raise CarbonUnavailable(self.REASON)

    def forecast(self, horizon: pd.Timedelta, now: pd.Timestamp | None = None) -> pd.Series:
        raise CarbonUnavailable(self.REASON)


def usable_forecast(series: pd.Series, label: str) -> pd.Series:
    """``series`` if it is non-empty, tz-aware, regular, increasing and has no missing value; else a
    :class:`~slurm_green.carbon.errors.DataValidationError` saying which of these it is not."""
    if series.empty:
        raise GapError(f"{label}: the forecast is empty")
    if not isinstance(series.index, pd.DatetimeIndex) or series.index.tz is None:
        raise DataValidationError(f"{label}: the forecast's timestamps have no timezone")
    values = series.to_numpy(dtype=np.float64)
    if not np.isfinite(values).all():
        first = series.index[~np.isfinite(values)][0]
        raise GapError(f"{label}: the forecast has {int((~np.isfinite(values)).sum())} missing value(s) from {first}")
    steps = np.diff(series.index.asi8)
    if len(steps) and (steps[0] <= 0 or (steps != steps[0]).any()):
        raise DataValidationError(f"{label}: the forecast's timestamps are not regular and increasing")
    return series
