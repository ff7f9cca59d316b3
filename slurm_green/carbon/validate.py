"""Validation and safe repair of carbon-intensity series.

Every source passes its raw series through :func:`validate_series` before
anyone uses it. The rule: repair with a logged warning only when the repair
cannot invent a wrong number (short gaps, exact duplicates, naive stamps in a
stated timezone, isolated absurd spikes treated as short gaps); otherwise raise
a typed :class:`~slurm_green.carbon.errors.DataValidationError` naming the
problem. The output is always regular, sorted, tz-aware UTC and non-negative.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from slurm_green.carbon.errors import (
    DuplicateTimestampError,
    GapError,
    StaleDataError,
    TimezoneError,
    UnitError,
    ValueRangeError,
)

log = logging.getLogger(__name__)

#: Highest plausible grid intensity in gCO2eq/kWh. Lignite plants emit ~1100-1200;
#: marginal rates stay below ~1000. Above this a value is an error or another unit.
ABSURD_MAX_G_PER_KWH = 1600.0
#: Small negatives come from rounding in upstream estimates; larger ones are errors.
NEGATIVE_TOLERANCE = 1.0
#: Duplicates whose values differ by more than this fraction conflict.
DUPLICATE_TOLERANCE = 0.05
#: Above this share of out-of-range points the series is rejected, not repaired.
MAX_OUTLIER_SHARE = 0.02
DEFAULT_MAX_GAP = pd.Timedelta(hours=3)
#: Gaps named one by one in a GapError; the rest are counted.
MAX_GAPS_LISTED = 5


def validate_series(
    raw: pd.Series,
    *,
    resolution: pd.Timedelta | None = None,
    tz: str | None = None,
    max_gap: pd.Timedelta = DEFAULT_MAX_GAP,
    now: pd.Timestamp | None = None,
    max_age: pd.Timedelta | None = None,
    check_units: bool = True,
    label: str = "series",
) -> pd.Series:
    """Return ``raw`` as a regular UTC series in gCO2eq/kWh, repaired or rejected.

    ``tz`` is the timezone of naive timestamps (aware ones are converted). A gap
    whose known neighbours are at most ``max_gap`` apart is interpolated linearly;
    longer gaps raise one :class:`GapError` that counts them and says where each
    is, because a series with a hole in it cannot answer for the hole, and a
    source that answers only sometimes is worse than one that fails (the fallback
    chain then moves on). ``now``/``max_age`` reject stale data. ``label`` names
    the series in messages.
    """
    values = pd.to_numeric(pd.Series(raw), errors="coerce").astype("float64")
    if values.empty or values.notna().sum() == 0:
        raise GapError(f"{label}: no values")
    index = _to_utc_index(values.index, tz, label)
    values = pd.Series(values.to_numpy(), index=index).sort_index()
    values = _collapse_duplicates(values, label)
    step = resolution or _infer_resolution(values.index, label)
    _check_grid(values.index, step, label)
    if check_units:
        _check_units(values, label)
    values = _drop_outliers(values, label)
    values = values.loc[values.first_valid_index() : values.last_valid_index()]
    regular = values.reindex(pd.date_range(values.index[0], values.index[-1], freq=step))
    regular = _fill_short_gaps(regular, step, max_gap, label)
    regular.index.freq = step
    regular.name = "gco2_per_kwh"
    if max_age is not None:
        check_fresh(regular, now=now, max_age=max_age, label=label)
    return regular


def check_fresh(
    series: pd.Series, *, now: pd.Timestamp | None, max_age: pd.Timedelta, label: str = "series"
) -> None:
    """Raise :class:`StaleDataError` if the newest valid point is older than ``max_age``."""
    now = now if now is not None else pd.Timestamp.now(tz="UTC")
    newest = series.dropna().index.max()
    if newest is pd.NaT or newest < now - max_age:
        raise StaleDataError(f"{label}: newest data point {newest} is older than {max_age} before {now}")


def check_value(value: float, *, label: str) -> float:
    """Validate one reading (a provider's "latest"): finite, non-negative, plausible."""
    if value is None or not np.isfinite(value):
        raise ValueRangeError(f"{label}: reading is missing or not a number")
    if value < -NEGATIVE_TOLERANCE or value > ABSURD_MAX_G_PER_KWH:
        raise ValueRangeError(f"{label}: reading {value} gCO2eq/kWh is outside 0..{ABSURD_MAX_G_PER_KWH:g}")
    return max(float(value), 0.0)


def _to_utc_index(index: pd.Index, tz: str | None, label: str) -> pd.DatetimeIndex:
    try:
        stamps = pd.DatetimeIndex(pd.to_datetime(index))
    except (ValueError, TypeError) as exc:
        raise TimezoneError(f"{label}: timestamps cannot be parsed ({exc})") from None
    if stamps.tz is None:
        if tz is None:
            raise TimezoneError(f"{label}: timestamps have no timezone and none was stated (use tz=...)")
        # The hour a DST change repeats is told apart by its order only ("infer", oldest first):
        # a newest-first file is read backwards; in any other order its two readings could be
        # swapped without a word, so it is refused.
        newest_first = stamps.has_duplicates and not stamps.is_monotonic_increasing and stamps.is_monotonic_decreasing
        if stamps.has_duplicates and not (stamps.is_monotonic_increasing or newest_first):
            raise TimezoneError(f"{label}: naive timestamps repeat a local time (a DST change?) out of time order, "
                                f"so which is which cannot be told: sort the file or give UTC offsets")
        try:
            ordered = stamps[::-1] if newest_first else stamps
            local = ordered.tz_localize(tz, ambiguous="infer", nonexistent="raise")
            stamps = local[::-1] if newest_first else local
        except Exception as exc:  # pytz/zoneinfo raise several types for DST problems
            raise TimezoneError(f"{label}: timestamps do not fit timezone {tz} ({exc})") from None
        log.warning("%s: naive timestamps localised as %s and converted to UTC", label, tz)
    return stamps.tz_convert("UTC")


def _collapse_duplicates(values: pd.Series, label: str) -> pd.Series:
    dup = values.index.duplicated(keep=False)
    if not dup.any():
        return values
    groups = values[dup].groupby(level=0)
    spread = (groups.max() - groups.min()) / groups.mean().abs().clip(lower=1.0)
    if (spread > DUPLICATE_TOLERANCE).any():
        first = spread[spread > DUPLICATE_TOLERANCE].index[0]
        raise DuplicateTimestampError(
            f"{label}: timestamp {first} appears with conflicting values "
            f"{values.loc[first].tolist()}; often a DST or timezone mistake"
        )
    log.warning("%s: %d duplicate timestamps collapsed", label, int(dup.sum()) - groups.ngroups)
    return values.groupby(level=0).mean()


def _infer_resolution(index: pd.DatetimeIndex, label: str) -> pd.Timedelta:
    if len(index) < 2:
        raise GapError(f"{label}: cannot infer resolution from one point; state it")
    return pd.Series(index).diff().median()


def _check_grid(index: pd.DatetimeIndex, step: pd.Timedelta, label: str) -> None:
    offsets = (index - index[0]) % step
    if (offsets != pd.Timedelta(0)).any():
        bad = index[offsets != pd.Timedelta(0)][0]
        raise TimezoneError(
            f"{label}: timestamp {bad} is off the {step} grid started at {index[0]}; "
            "mixed offsets or a timezone mistake"
        )


def _check_units(values: pd.Series, label: str) -> None:
    valid = values.dropna()
    median, top = float(valid.median()), float(valid.max())
    if median > ABSURD_MAX_G_PER_KWH:
        raise UnitError(
            f"{label}: median {median:.0f} is above any grid's gCO2eq/kWh; "
            "looks like lbs/MWh or mg/kWh (1 lb/MWh = 0.453592 g/kWh)"
        )
    if len(valid) >= 24 and median < 1.0 and top < 2.0:
        raise UnitError(
            f"{label}: all values below 2 (median {median:.3f}); looks like kg/kWh, not g/kWh "
            "(pass check_units=False if this grid really is that clean)"
        )


def _drop_outliers(values: pd.Series, label: str) -> pd.Series:
    negative = values < -NEGATIVE_TOLERANCE
    absurd = values > ABSURD_MAX_G_PER_KWH
    bad = negative | absurd
    if bad.mean() > MAX_OUTLIER_SHARE:
        kind = "negative" if negative.sum() >= absurd.sum() else "absurdly high"
        raise ValueRangeError(
            f"{label}: {int(bad.sum())} of {len(values)} values are {kind} "
            f"(allowed 0..{ABSURD_MAX_G_PER_KWH:g} gCO2eq/kWh)"
        )
    if bad.any():
        log.warning("%s: %d out-of-range values dropped and treated as gaps", label, int(bad.sum()))
    small_negative = (values < 0) & ~negative
    if small_negative.any():
        log.warning("%s: %d slightly negative values clipped to 0", label, int(small_negative.sum()))
    return values.mask(bad).clip(lower=0.0)


def _fill_short_gaps(regular: pd.Series, step: pd.Timedelta, max_gap: pd.Timedelta, label: str) -> pd.Series:
    missing = regular.isna()
    if not missing.any():
        return regular
    runs = _missing_runs(regular.index, missing)
    # A run of n missing points lies between known neighbours (n + 1) steps apart.
    long = [(first, count) for first, count in runs if (count + 1) * step > max_gap]
    if long:
        where = "; ".join(
            f"{count} point(s) missing from {first} ({(count + 1) * step} between known values)"
            for first, count in long[:MAX_GAPS_LISTED]
        )
        more = f"; and {len(long) - MAX_GAPS_LISTED} more" if len(long) > MAX_GAPS_LISTED else ""
        raise GapError(
            f"{label}: {len(long)} gap(s) longer than {max_gap} (the most that is interpolated): {where}{more}"
        )
    log.warning("%s: %d missing point(s) in %d short gap(s) interpolated", label, int(missing.sum()), len(runs))
    return regular.interpolate(method="time", limit_area="inside")


def _missing_runs(index: pd.DatetimeIndex, missing: pd.Series) -> list[tuple[pd.Timestamp, int]]:
    """Each run of consecutive missing points: its first timestamp and its length."""
    flags = missing.to_numpy()
    edges = np.flatnonzero(np.diff(np.concatenate(([False], flags, [False])).astype(np.int8)))
    return [(index[start], int(end - start)) for start, end in zip(edges[::2], edges[1::2], strict=True)]
