"""WattTime API v3: marginal emissions (``co2_moer``) forecast and history for one region.

Login is ``GET /login`` with HTTP basic auth, answering ``{"token": ...}``;
the token (valid 30 minutes) goes in ``Authorization: Bearer``. Data calls:
``GET /v3/forecast?region=R&signal_type=co2_moer&horizon_hours=H`` and
``GET /v3/historical?region=R&signal_type=co2_moer&start=...&end=...``, both
answering ``{"data": [{"point_time", "value"}...], "meta": {"units", ...}}``
at 5-minute resolution. ``co2_moer`` is in lbs/MWh (``meta.units ==
"lbs_co2_per_mwh"``) and is converted: 1 lb/MWh = 0.453592 g/kWh. Other units
are refused rather than guessed. Note MOER is a *marginal* rate, not the
average intensity the other sources give; do not mix them in one chain
unless that is intended.
"""

from __future__ import annotations

import time

import pandas as pd
from pydantic import SecretStr

from slurm_green.carbon.errors import AuthError, MalformedResponseError, StaleDataError, UnitError
from slurm_green.carbon.http import HttpClient
from slurm_green.carbon.payload import field, mapping, series_from_points, timestamp
from slurm_green.carbon.secrets import Credential, reveal
from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.timebase import as_utc
from slurm_green.carbon.validate import validate_series

BASE_URL = "https://api.watttime.org"
LBS_PER_MWH_TO_G_PER_KWH = 0.453592
UNIT_SCALE = {"lbs_co2_per_mwh": LBS_PER_MWH_TO_G_PER_KWH}
TOKEN_LIFETIME_S = 25 * 60  # tokens last 30 min; renew early


class WattTimeSource(CarbonSource):
    """Live marginal emissions (MOER) for one WattTime region (e.g. ``CAISO_NORTH``)."""

    resolution = pd.Timedelta(minutes=5)

    def __init__(
        self,
        region: str,
        username: SecretStr | Credential,
        password: SecretStr | Credential,
        *,
        base_url: str = BASE_URL,
        max_age: pd.Timedelta = pd.Timedelta(hours=2),
        http: HttpClient | None = None,
    ) -> None:
        self.region = region
        self.name = f"watttime:{region}"
        self._username = username
        self._password = password
        self.max_age = max_age
        self._http = http or HttpClient(base_url, label=self.name)
        self._token: SecretStr | None = None
        self._token_time = 0.0

    def forecast(self, horizon: pd.Timedelta, now: pd.Timestamp | None = None) -> pd.Series:
        now = as_utc(now)
        hours = max(1, int(-(-horizon // pd.Timedelta(hours=1))))
        body = self._data("/v3/forecast", {"horizon_hours": hours})
        generated = mapping(body, "meta", label=self.name).get("generated_at")
        if generated is not None and now - timestamp(generated, label=f"{self.name} meta.generated_at") > self.max_age:
            raise StaleDataError(f"{self.name}: forecast generated at {generated}, older than {self.max_age}")
        series = self._series(body, "forecast")
        if series.index[0] > now.floor(self.resolution):
            raise StaleDataError(f"{self.name}: forecast starts at {series.index[0]}, after now ({now})")
        return series.loc[now.floor(self.resolution) :]

    def history(self, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
        params = {"start": as_utc(start).isoformat(), "end": as_utc(end).isoformat()}
        return self._series(self._data("/v3/historical", params), "history")

    def _series(self, body: dict, what: str) -> pd.Series:
        label = f"{self.name} {what}"
        units = mapping(body, "meta", label=label).get("units", "lbs_co2_per_mwh")
        if not isinstance(units, str) or units not in UNIT_SCALE:
            raise UnitError(f"{label}: unsupported units {units!r} (expected lbs_co2_per_mwh)")
        raw = series_from_points(
            field(body, "data", label=label),
            time_of=lambda p: p["point_time"],
            value_of=lambda p: p["value"],
            label=label,
            scale=UNIT_SCALE[units],
        )
        return validate_series(raw, resolution=self.resolution, label=label)

    def _data(self, path: str, extra: dict) -> dict:
        params = {"region": self.region, "signal_type": "co2_moer", **extra}
        try:
            return self._http.get_json(path, params=params, headers=self._auth_header())
        except AuthError:
            self._token = None  # expired or revoked: log in again once
            return self._http.get_json(path, params=params, headers=self._auth_header())

    def _auth_header(self) -> dict[str, str]:
        if self._token is None or time.monotonic() - self._token_time > TOKEN_LIFETIME_S:
            body = self._http.get_json(
                "/login", auth=(reveal(self._username), reveal(self._password))
            )
            token = field(body, "token", label=f"{self.name} login")
            if not isinstance(token, str) or not token:
                raise MalformedResponseError(f"{self.name} login: token is not a string")
            self._token, self._token_time = SecretStr(token), time.monotonic()
        return {"Authorization": f"Bearer {self._token.get_secret_value()}"}
