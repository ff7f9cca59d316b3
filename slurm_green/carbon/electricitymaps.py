"""Electricity Maps API v3: latest, history (last 24 h) and forecast for one zone.

Endpoints (``auth-token`` header): ``GET /carbon-intensity/latest?zone=Z``
(``{"zone", "carbonIntensity", "datetime", "updatedAt", ...}``),
``GET /carbon-intensity/history?zone=Z`` (``{"zone", "history": [point...]}``)
and ``GET /carbon-intensity/forecast?zone=Z`` (``{"zone", "forecast":
[{"carbonIntensity", "datetime"}...], "updatedAt"}``). Values are gCO2eq/kWh.
We ask for ``emissionFactorType=direct`` by default, matching the shared
exports' default column. The forecast endpoint needs a paid plan: when it
answers 401/403 (and the latest value works) the built-in forecaster runs on
the 24 h history instead, and the log says so.
"""

from __future__ import annotations

import logging

import pandas as pd
from pydantic import SecretStr

from slurm_green.carbon.errors import AuthError, StaleDataError
from slurm_green.carbon.forecast import SeasonalForecaster
from slurm_green.carbon.http import HttpClient
from slurm_green.carbon.payload import field, number, series_from_points, timestamp
from slurm_green.carbon.secrets import Credential, reveal
from slurm_green.carbon.source import CarbonSource, Reading
from slurm_green.carbon.timebase import as_utc
from slurm_green.carbon.validate import check_value, validate_series

log = logging.getLogger(__name__)
BASE_URL = "https://api.electricitymap.org/v3"
#: The API's ``emissionFactorType`` values.
EMISSION_FACTORS = ("direct", "lifecycle")


class ElectricityMapsSource(CarbonSource):
    """Live carbon intensity for one Electricity Maps zone (e.g. ``DE``, ``US-CAL-CISO``)."""

    resolution = pd.Timedelta(hours=1)
    forecast_training = pd.Timedelta(hours=24)

    def __init__(
        self,
        zone: str,
        token: SecretStr | Credential,
        *,
        base_url: str = BASE_URL,
        emission_factor: str = "direct",
        max_age: pd.Timedelta = pd.Timedelta(hours=3),
        http: HttpClient | None = None,
    ) -> None:
        self.zone = zone
        # The factor is in the name because the name is what the disk cache, the logs and the
        # snapshot's provenance go by: direct and life-cycle numbers differ by a fifth or more.
        self.name = f"electricitymaps:{zone}" + ("" if emission_factor == "direct" else f"?factor={emission_factor}")
        self._token = token
        self.emission_factor = emission_factor
        self.max_age = max_age
        self._http = http or HttpClient(base_url, label=self.name)

    def latest(self, now: pd.Timestamp | None = None) -> Reading:
        now = as_utc(now)
        body = self._get("/carbon-intensity/latest")
        when = timestamp(field(body, "datetime", label=self.name), label=self.name)
        if now - when > self.max_age:
            raise StaleDataError(f"{self.name}: latest value is from {when}, older than {self.max_age}")
        value = check_value(number(field(body, "carbonIntensity", label=self.name), self.name), label=self.name)
        return Reading(when, value, self.name)

    def history(self, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
        body = self._get("/carbon-intensity/history")
        series = self._series(field(body, "history", label=self.name), f"{self.name} history")
        window = series.loc[as_utc(start) : as_utc(end) - pd.Timedelta(1)]
        if window.dropna().empty:
            raise StaleDataError(f"{self.name}: history has nothing in [{start}, {end})")
        return window

    def forecast(self, horizon: pd.Timedelta, now: pd.Timestamp | None = None) -> pd.Series:
        now = as_utc(now)
        current = self.latest(now)
        try:
            body = self._get("/carbon-intensity/forecast")
        except AuthError as exc:
            log.warning("%s: forecast not available (%s); using the built-in forecaster", self.name, exc)
            past = self.history(now - self.forecast_training, now + self.resolution)
            return SeasonalForecaster().forecast(past, now=now, horizon=horizon)
        future = series_from_points(
            field(body, "forecast", label=self.name),
            time_of=lambda p: p["datetime"],
            value_of=lambda p: p["carbonIntensity"],
            label=f"{self.name} forecast",
        )
        period = current.time.floor(self.resolution)
        # The latest value replaces the forecast's for its own period only: any other repeated
        # timestamp is the provider's, and validation must see it (agreeing: merged; else refused).
        combined = pd.concat([pd.Series([current.value], index=[period]), future[future.index != period]])
        series = validate_series(combined, resolution=self.resolution, label=f"{self.name} forecast")
        return series.loc[now.floor(self.resolution) :]

    def _get(self, path: str) -> dict:
        params = {"zone": self.zone}
        if self.emission_factor:
            params["emissionFactorType"] = self.emission_factor
        return self._http.get_json(path, params=params, headers={"auth-token": reveal(self._token)})

    def _series(self, points: object, label: str) -> pd.Series:
        raw = series_from_points(
            points, time_of=lambda p: p["datetime"], value_of=lambda p: p["carbonIntensity"], label=label
        )
        return validate_series(raw, resolution=self.resolution, label=label)
