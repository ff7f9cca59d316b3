"""Turning providers' JSON lists of points into raw Series, failing loudly on surprises."""

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
        values = [_number(value_of(p), label) for p in points]
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedResponseError(f"{label}: unexpected point format ({type(exc).__name__}: {exc})") from None
    return pd.Series(values, index=pd.DatetimeIndex(stamps), dtype="float64") * scale


def field(payload: Any, *keys: str, label: str) -> Any:
    """``payload[k1][k2]...`` or :class:`MalformedResponseError` naming the missing key."""
    for key in keys:
        if not isinstance(payload, dict) or key not in payload:
            raise MalformedResponseError(f"{label}: answer lacks {'.'.join(keys)!r}")
        payload = payload[key]
    return payload


def _objects(points: Iterable[Any], label: str) -> Iterable[dict[str, Any]]:
    for point in points:
        if not isinstance(point, dict):
            raise MalformedResponseError(f"{label}: point {point!r} is not an object")
        yield point


def _number(value: Any, label: str) -> float:
    if value is None:
        return float("nan")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MalformedResponseError(f"{label}: value {value!r} is not a number")
    return float(value)
