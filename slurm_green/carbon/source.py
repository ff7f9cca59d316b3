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

import pandas as pd

from slurm_green.carbon.answer import Answer
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
        """The forecast with its provenance (a chain says which member answered)."""
        return Answer(self.forecast(horizon, now=now), self.name, self.synthetic)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
