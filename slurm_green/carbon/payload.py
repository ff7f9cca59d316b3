"""Turning providers' JSON into raw Series, stamps and numbers, failing loudly on surprises.

Every surprise is a :class:`MalformedResponseError`: a provider's bad answer fails that source
with a typed error (the chain moves on, the log says which field), not as an "unexpected"
pandas or numpy exception reported as a bug of ours. A value quoted in a message is cut
short, since a provider's answer may be megabytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from slurm_green.carbon.errors import MalformedResponseError


def series_from_points(
    points: Any,
    *,
    time_of: Callable[[dict[str, Any]], Any],
    value_of: Callable[[dict[str, Any]], Any],
    label: str,
    scale: float = 1.0,
) -> pd.Series:
    """A raw (unvalidated) Series from JSON points; ``None`` values become NaN.

    Raises :class:`MalformedResponseError` if ``points`` is not a non-empty
    list of objects with parseable times and numeric-or-null values.
    """
    if not isinstance(points, list) or not points:
        raise MalformedResponseError(f"{label}: expected a non-empty list of points")
    try:
        stamps = pd.to_datetime([time_of(p) for p in _objects(points, label)], utc=True)
        values = [number(value_of(p), label) for p in points]
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise MalformedResponseError(
            f"{label}: unexpected point format ({type(exc).__name__}: {_cut(str(exc))})"
        ) from None
    return pd.Series(values, index=pd.DatetimeIndex(stamps), dtype="float64") * scale


def field(payload: Any, *keys: str, label: str) -> Any:
    """``payload[k1][k2]...`` or :class:`MalformedResponseError` naming the missing key."""
    for key in keys:
        if not isinstance(payload, dict) or key not in payload:
            raise MalformedResponseError(f"{label}: answer lacks {'.'.join(keys)!r}")
        payload = payload[key]
    return payload


def timestamp(value: Any, *, label: str) -> pd.Timestamp:
    """A provider's time stamp (an ISO string) as UTC; naive is read as UTC, as the APIs write it."""
    if not isinstance(value, str):
        raise MalformedResponseError(f"{label}: time {_quote(value)} is not a string")
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, OverflowError):
        stamp = pd.NaT
    if pd.isna(stamp):
        raise MalformedResponseError(f"{label}: time {_quote(value)} is not a date and time")
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def mapping(payload: Any, *keys: str, label: str) -> dict[str, Any]:
    """``field(payload, *keys)`` that must be a JSON object."""
    value = field(payload, *keys, label=label)
    if not isinstance(value, dict):
        raise MalformedResponseError(f"{label}: {'.'.join(keys)!r} is not an object")
    return value


def number(value: Any, label: str) -> float:
    """A JSON number as a float (``None`` is NaN: a missing value); anything else is malformed."""
    if value is None:
        return float("nan")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MalformedResponseError(f"{label}: value {_quote(value)} is not a number")
    try:
        return float(value)
    except OverflowError:
        raise MalformedResponseError(f"{label}: value {_cut(str(value))} is not a float") from None


def _objects(points: Iterable[Any], label: str) -> Iterable[dict[str, Any]]:
    for point in points:
        if not isinstance(point, dict):
            raise MalformedResponseError(f"{label}: point {_quote(point)} is not an object")
        yield point


def _quote(value: Any) -> str:
    return _cut(repr(value))


def _cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
