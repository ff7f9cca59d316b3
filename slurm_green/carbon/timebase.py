"""Time helpers shared by the carbon modules: one notion of "now" and of epoch seconds.

pandas 3 stores timestamps at varying resolutions (s, ms, us, ns), so raw
``asi8`` values are not comparable across series; these helpers are.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

EPOCH = pd.Timestamp(0, tz="UTC")
ONE_SECOND = pd.Timedelta(seconds=1)


def utc_now() -> pd.Timestamp:
    """The current time as a tz-aware UTC timestamp."""
    return pd.Timestamp.now(tz="UTC")


def as_utc(ts: pd.Timestamp | str | float | None) -> pd.Timestamp:
    """Coerce a timestamp, ISO string or epoch seconds to tz-aware UTC (``None`` means now).

    A naive timestamp is rejected: guessing its timezone is how wrong numbers happen.
    """
    if ts is None:
        return utc_now()
    if isinstance(ts, (int, float, np.integer, np.floating)):
        return EPOCH + pd.Timedelta(seconds=float(ts))
    out = pd.Timestamp(ts)
    if out.tzinfo is None:
        raise ValueError(f"timestamp {out} has no timezone; give it in UTC")
    return out.tz_convert("UTC")


def epoch_seconds(index: pd.DatetimeIndex) -> np.ndarray:
    """Seconds since 1970-01-01 UTC as float64, whatever the index's resolution."""
    return np.asarray((index - EPOCH) / ONE_SECOND, dtype=np.float64)


def floor_on(ts: pd.Timestamp, step: pd.Timedelta, origin: pd.Timestamp) -> pd.Timestamp:
    """The start of the period holding ``ts`` on the grid of ``step`` through ``origin``.

    ``ts.floor(step)`` assumes periods start on multiples of ``step`` since the epoch; a
    series recorded in local hours of a half-hour zone (India, UTC+05:30) starts its
    periods at :30 UTC, and flooring "now" to :00 names a period it does not have.
    """
    return origin + ((ts - origin) // step) * step
