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

import os
import re
import warnings
import zoneinfo
from pathlib import Path

import pandas as pd

from slurm_green.carbon.errors import CarbonError, DataValidationError, GapError, SourceError, SourceSpecError
from slurm_green.carbon.replay import replay_window
from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.timebase import as_utc, floor_on
from slurm_green.carbon.validate import DEFAULT_MAX_GAP, validate_series
from slurm_green.core.regular_file import open_regular

EM_TIME_COLUMN = "Datetime (UTC)"
EM_VALUE_COLUMNS = {
    "direct": "Carbon Intensity gCO₂eq/kWh (direct)",
    "lca": "Carbon Intensity gCO₂eq/kWh (LCA)",
}
#: Multipliers from supported units to gCO2eq/kWh (1 lb/MWh = 453.592 g / 1000 kWh).
UNIT_TO_G_PER_KWH = {"g/kWh": 1.0, "kg/kWh": 1000.0, "lbs/MWh": 0.453592, "t/MWh": 1000.0}
FORECAST_MODES = ("oracle", "model")


def read_carbon_csv(
    path: str | Path,
    *,
    tz: str | None = None,
    column: str = "direct",
    unit: str = "g/kWh",
    max_gap: pd.Timedelta = DEFAULT_MAX_GAP,
) -> pd.Series:
    """Read and validate a carbon CSV (layout detected from the header) as gCO2eq/kWh on UTC.

    Gaps longer than ``max_gap`` are a :class:`GapError` naming each (see
    :func:`validate_series`). Every failure is a :class:`CarbonError`: whatever
    bytes the file holds, a caller that falls back on another source sees one
    typed error, never a pandas exception.
    """
    check_file_options(tz=tz, column=column, unit=unit)
    path = Path(path)
    try:
        with open_regular(path) as handle:
            frame = pd.read_csv(handle, encoding="utf-8")
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise SourceError(f"cannot read carbon CSV {path}: {_reason(exc)}") from None
    if EM_TIME_COLUMN in frame.columns:
        if EM_VALUE_COLUMNS[column] not in frame.columns:
            raise DataValidationError(f"{path}: Electricity Maps export lacks {EM_VALUE_COLUMNS[column]!r}")
        stamps = _stamps(frame[EM_TIME_COLUMN], path)
        stamps = stamps.tz_localize("UTC") if stamps.tz is None else stamps.tz_convert("UTC")
        raw = pd.Series(frame[EM_VALUE_COLUMNS[column]].to_numpy(), index=stamps)
        return validate_series(raw, max_gap=max_gap, label=str(path))
    if {"timestamp", "value"} <= set(frame.columns):
        values = pd.to_numeric(frame["value"], errors="coerce") * UNIT_TO_G_PER_KWH[unit]
        raw = pd.Series(values.to_numpy(), index=_stamps(frame["timestamp"], path))
        return validate_series(raw, tz=tz, max_gap=max_gap, label=str(path))
    raise DataValidationError(
        f"{path}: unknown CSV layout (columns {list(frame.columns)[:6]}); expected an Electricity Maps "
        f"export ({EM_TIME_COLUMN!r}, ...) or 'timestamp,value'"
    )


def check_file_options(*, tz: str | None, column: str, unit: str) -> None:
    """Refuse options no file could satisfy, before any file is read (a config error, not a data one)."""
    if column not in EM_VALUE_COLUMNS:
        raise SourceSpecError(f"column must be one of {sorted(EM_VALUE_COLUMNS)}, not {column!r}")
    if unit not in UNIT_TO_G_PER_KWH:
        raise SourceSpecError(f"unit must be one of {sorted(UNIT_TO_G_PER_KWH)}, not {unit!r}")
    if tz is not None:
        try:
            zoneinfo.ZoneInfo(tz)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise SourceSpecError(f"tz={tz!r} is not a timezone name (e.g. Europe/Berlin, UTC)") from None


#: A time of day followed by a UTC offset (``Z``, ``+01:00``, ``-0500``): a stamp that says which instant it is.
_WITH_OFFSET = re.compile(r"\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:Z|[+-]\d{2}(?::?\d{2})?)$", re.IGNORECASE)


def _stamps(column: pd.Series, path: Path) -> pd.DatetimeIndex:
    """The column's instants. Stamps that all carry offsets are read as the instants they name,
    even when the offsets differ (local time written across a DST change: +02:00, then +01:00);
    naive ones are left naive for the stated ``tz``; a mix of both is refused."""
    text = column.astype(str).str.strip()
    with_offset = text.str.contains(_WITH_OFFSET)
    if with_offset.any() and not with_offset.all():
        raise DataValidationError(f"{path}: some timestamps carry a UTC offset and some do not "
                                  f"(row {int((~with_offset).to_numpy().argmax()) + 2} has none)")
    try:
        with warnings.catch_warnings(action="ignore", category=UserWarning):  # "could not infer format": fine here
            return pd.DatetimeIndex(pd.to_datetime(text, utc=bool(with_offset.all())))
    except (ValueError, TypeError, OverflowError) as exc:
        raise DataValidationError(f"{path}: unparseable timestamps ({exc})") from None


def _reason(exc: Exception) -> str:
    """An OS error's own words (``Permission denied``) without repeating the path."""
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


class FileSource(CarbonSource):
    """A recorded series from a CSV file, optionally replayed onto the present.

    The file is read on first use, not when the source is built, and read again
    whenever it changes (inode, size, modification or status-change time): a
    controller whose file is unreadable or broken at start still starts (this
    source fails and the chain moves on), and a file fixed, replaced or made
    unreadable later is noticed at the next refresh without a restart. An
    unchanged broken file is not parsed again; its error is raised again.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        tz: str | None = None,
        replay: bool = False,
        forecast: str = "oracle",
        column: str = "direct",
        unit: str = "g/kWh",
        max_gap: pd.Timedelta = DEFAULT_MAX_GAP,
        name: str | None = None,
    ) -> None:
        if forecast not in FORECAST_MODES:
            raise SourceSpecError(f"forecast must be one of {list(FORECAST_MODES)}, not {forecast!r}")
        check_file_options(tz=tz, column=column, unit=unit)
        self.path = Path(path)
        self.name = name or f"csv:{path}"
        self.replay = replay
        self.forecast_mode = forecast
        self._read_options = {"tz": tz, "column": column, "unit": unit, "max_gap": max_gap}
        self._version: tuple[int, ...] | None = None
        self._loaded: pd.Series | CarbonError | None = None

    @property
    def recorded(self) -> pd.Series:
        """The file's validated series, read again if the file changed; a :class:`CarbonError` if unusable."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise SourceError(f"cannot read carbon CSV {self.path}: {_reason(exc)}") from None
        version = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if version != self._version:
            try:
                self._loaded = read_carbon_csv(self.path, **self._read_options)
            except CarbonError as exc:
                self._loaded = exc
            self._version = version
        if isinstance(self._loaded, CarbonError):
            raise self._loaded.with_traceback(None)
        assert self._loaded is not None
        return self._loaded

    @property
    def resolution(self) -> pd.Timedelta:
        return pd.Timedelta(self.recorded.index.freq)

    def history(self, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
        start, end = as_utc(start), as_utc(end)
        recorded = self.recorded
        if self.replay:
            return replay_window(recorded, start, end)
        window = recorded.loc[start : end - pd.Timedelta(1)]
        if window.empty:
            raise GapError(
                f"{self.name}: no data in [{start}, {end}); the file covers "
                f"{recorded.index[0]} to {recorded.index[-1]} (use replay=1 to map it onto now)"
            )
        return window

    def forecast(self, horizon: pd.Timedelta, now: pd.Timestamp | None = None) -> pd.Series:
        now = as_utc(now)
        if self.forecast_mode == "model":
            return super().forecast(horizon, now=now)
        first = floor_on(now, self.resolution, self.recorded.index[0])
        window = self.history(first, now + horizon + pd.Timedelta(1))
        if window.index[0] != first:
            raise GapError(f"{self.name}: no value for the current period {first}")
        return window
