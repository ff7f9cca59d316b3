"""UK National Grid ESO Carbon Intensity API (no key): national or regional, 30 min, 48 h forecast.

National: ``GET /intensity/{from}/fw48h`` and ``GET /intensity/{from}/{to}``
answer ``{"data": [{"from", "to", "intensity": {"forecast", "actual", "index"}}...]}``.
Regional (region id 1-17): ``GET /regional/intensity/{from}/fw48h/regionid/{id}``
and ``GET /regional/intensity/{from}/{to}/regionid/{id}`` answer
``{"data": {"regionid", "shortname", "data": [{"from", "to", "intensity": {"forecast", "index"}}...]}}``.
Times are ``YYYY-MM-DDTHH:MMZ``. We use ``actual`` where published, else ``forecast``.
"""

from __future__ import annotations

import pandas as pd

from slurm_green.carbon.errors import MalformedResponseError, SourceSpecError, StaleDataError
from slurm_green.carbon.http import HttpClient
from slurm_green.carbon.payload import field, series_from_points
from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.timebase import as_utc
from slurm_green.carbon.validate import validate_series

BASE_URL = "https://api.carbonintensity.org.uk"
REGION_IDS = range(1, 18)


def _stamp(ts: pd.Timestamp) -> str:
    return ts.strftime("%Y-%m-%dT%H:%MZ")


class UkGridSource(CarbonSource):
    """GB national (``region=None``) or regional carbon intensity from the ESO API."""

    resolution = pd.Timedelta(minutes=30)

    def __init__(self, region: int | None = None, *, base_url: str = BASE_URL, http: HttpClient | None = None) -> None:
        if region is not None and region not in REGION_IDS:
            raise SourceSpecError(f"ukgrid region must be an id in 1..17, not {region}")
        self.region = region
        self.name = "ukgrid" if region is None else f"ukgrid:{region}"
        self._http = http or HttpClient(base_url, label=self.name)

    def forecast(self, horizon: pd.Timedelta, now: pd.Timestamp | None = None) -> pd.Series:
        now = as_utc(now)
        first = now.floor(self.resolution)
        series = self._get(f"/{_stamp(first)}/fw48h", "forecast")
        if series.index[0] > first:
            raise StaleDataError(f"{self.name}: forecast starts at {series.index[0]}, after now ({now})")
        return series.loc[first : now + horizon]

    def history(self, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
        start, end = as_utc(start), as_utc(end)
        return self._get(f"/{_stamp(start)}/{_stamp(end)}", "history").loc[start : end - pd.Timedelta(1)]

    def _get(self, span: str, what: str) -> pd.Series:
        label = f"{self.name} {what}"
        if self.region is None:
            points = field(self._http.get_json(f"/intensity{span}"), "data", label=label)
        else:
            body = self._http.get_json(f"/regional/intensity{span}/regionid/{self.region}")
            points = field(body, "data", "data", label=label)
        raw = series_from_points(points, time_of=lambda p: p["from"], value_of=_best_value, label=label)
        return validate_series(raw, resolution=self.resolution, label=label)


def _best_value(point: dict) -> float | None:
    intensity = point["intensity"]
    if not isinstance(intensity, dict):
        raise MalformedResponseError(f"intensity {intensity!r} is not an object")
    actual = intensity.get("actual")
    return actual if actual is not None else intensity["forecast"]
