"""Carbon intensity from CSV files: Electricity Maps exports and a generic format.

Two layouts are recognised by their header:

- Electricity Maps export: ``Datetime (UTC)`` plus ``Carbon Intensity gCO₂eq/kWh (direct)``
  (or ``(LCA)``), hourly, UTC, gCO2eq/kWh;
- generic: ``timestamp,value``, in the unit stated (g/kWh default; kg/kWh and
  lbs/MWh are converted), timestamps with offsets or naive in a stated ``tz``.

A :class:`FileSource` answers for times inside the file (simulation at recorded
times) or, with ``replay=True``, maps the recorded period onto any time (see
:mod:`slurm_green.carbon.replay`). Its forecast is by default the recorded
future (``forecast="oracle"``, perfect foresight, right for replaying what
happened); ``forecast="model"`` uses the built-in forecaster on the past only.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from slurm_green.carbon.errors import DataValidationError, GapError, SourceError, SourceSpecError
from slurm_green.carbon.replay import replay_window
from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.timebase import as_utc
from slurm_green.carbon.validate import validate_series

EM_TIME_COLUMN = "Datetime (UTC)"
EM_VALUE_COLUMNS = {
    "direct": "Carbon Intensity gCO₂eq/kWh (direct)",
    "lca": "Carbon Intensity gCO₂eq/kWh (LCA)",
}
#: Multipliers from supported units to gCO2eq/kWh (1 lb/MWh = 453.592 g / 1000 kWh).
UNIT_TO_G_PER_KWH = {"g/kWh": 1.0, "kg/kWh": 1000.0, "lbs/MWh": 0.453592, "t/MWh": 1000.0}


def read_carbon_csv(
    path: str | Path, *, tz: str | None = None, column: str = "direct", unit: str = "g/kWh"
) -> pd.Series:
    """Read and validate a carbon CSV (layout detected from the header) as gCO2eq/kWh on UTC.

    Long gaps are kept as NaN (history may have outages; forecasts skip them).
    """
    path = Path(path)
    try:
        frame = pd.read_csv(path, encoding="utf-8")
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise SourceError(f"cannot read carbon CSV {path}: {exc}") from None
    if EM_TIME_COLUMN in frame.columns:
        if column not in EM_VALUE_COLUMNS:
            raise SourceSpecError(f"column must be one of {sorted(EM_VALUE_COLUMNS)}, not {column!r}")
        if EM_VALUE_COLUMNS[column] not in frame.columns:
            raise DataValidationError(f"{path}: Electricity Maps export lacks {EM_VALUE_COLUMNS[column]!r}")
        stamps = pd.to_datetime(frame[EM_TIME_COLUMN]).dt.tz_localize("UTC")
        raw = pd.Series(frame[EM_VALUE_COLUMNS[column]].to_numpy(), index=pd.DatetimeIndex(stamps))
        return validate_series(raw, keep_long_gaps=True, label=str(path))
    if {"timestamp", "value"} <= set(frame.columns):
        if unit not in UNIT_TO_G_PER_KWH:
            raise SourceSpecError(f"unit must be one of {sorted(UNIT_TO_G_PER_KWH)}, not {unit!r}")
        try:
            stamps = pd.DatetimeIndex(pd.to_datetime(frame["timestamp"], utc=False))
        except (ValueError, TypeError) as exc:
            raise DataValidationError(f"{path}: unparseable or mixed-offset timestamps ({exc})") from None
        values = pd.to_numeric(frame["value"], errors="coerce") * UNIT_TO_G_PER_KWH[unit]
        raw = pd.Series(values.to_numpy(), index=stamps)
        return validate_series(raw, tz=tz, keep_long_gaps=True, label=str(path))
    raise DataValidationError(
        f"{path}: unknown CSV layout (columns {list(frame.columns)[:6]}); expected an Electricity Maps "
        f"export ({EM_TIME_COLUMN!r}, ...) or 'timestamp,value'"
    )


class FileSource(CarbonSource):
    """A recorded series from a CSV file, optionally replayed onto the present."""

    def __init__(
        self,
        path: str | Path,
        *,
        tz: str | None = None,
        replay: bool = False,
        forecast: str = "oracle",
        column: str = "direct",
        unit: str = "g/kWh",
        name: str | None = None,
    ) -> None:
        if forecast not in ("oracle", "model"):
            raise SourceSpecError(f"forecast must be 'oracle' or 'model', not {forecast!r}")
        self.path = Path(path)
        self.name = name or f"csv:{path}"
        self.replay = replay
        self.forecast_mode = forecast
        self.recorded = read_carbon_csv(path, tz=tz, column=column, unit=unit)
        self.resolution = pd.Timedelta(self.recorded.index.freq)

    def history(self, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
        start, end = as_utc(start), as_utc(end)
        if self.replay:
            return replay_window(self.recorded, start, end)
        window = self.recorded.loc[start : end - pd.Timedelta(1)].dropna()
        if window.empty:
            raise GapError(
                f"{self.name}: no data in [{start}, {end}); the file covers "
                f"{self.recorded.index[0]} to {self.recorded.index[-1]} (use replay=1 to map it onto now)"
            )
        return window

    def forecast(self, horizon: pd.Timedelta, now: pd.Timestamp | None = None) -> pd.Series:
        now = as_utc(now)
        if self.forecast_mode == "model":
            return super().forecast(horizon, now=now)
        first = now.floor(self.resolution)
        window = self.history(first, now + horizon + pd.Timedelta(1))
        if window.index[0] != first:
            raise GapError(f"{self.name}: no value for the current period {first}")
        return window
