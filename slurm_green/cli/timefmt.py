"""Times as the user commands show and read them: UTC by default, local time on request.

UTC is the default because the controller, its store and its logs work in UTC and
two admins in two zones then read the same line; ``--local-time`` (or
``SLURM_GREEN_LOCAL_TIME=1`` in a login script) shows the zone of the machine the
command runs on (``TZ`` chooses it), which is what a user comparing with ``squeue``
and ``sbatch --begin`` (both local time) wants. Times the user types follow the same
choice: a time without a zone is read in the zone the output is shown in.
"""

from __future__ import annotations

import datetime as dt

import click

from slurm_green.core.green_options import GreenOptionError, parse_duration

local_time_option = click.option(
    "--local-time", is_flag=True, envvar="SLURM_GREEN_LOCAL_TIME",
    help="Show (and read) times in this machine's time zone instead of UTC [env SLURM_GREEN_LOCAL_TIME=1].")

#: How far from now a typed time may lie. ``stamp``/``iso`` go through ``datetime``, which
#: ends at years 1 and 9999 (less in a local zone): ``--since 1000000d`` parses, and then
#: showing it was an internal error. A century either way holds every real period and deadline.
MAX_SPAN_S = 100 * 365.25 * 86400


def _zone(local: bool) -> dt.tzinfo | None:
    """``None`` is Python's "this machine's zone" for ``astimezone``."""
    return None if local else dt.timezone.utc


def stamp(t: float | None, local: bool = False) -> str:
    """``2026-11-23 14:00 UTC`` (or the local zone's abbreviation); ``-`` for no time."""
    if t is None:
        return "-"
    when = dt.datetime.fromtimestamp(float(t), dt.timezone.utc).astimezone(_zone(local))
    return when.strftime("%Y-%m-%d %H:%M %Z")


def iso(t: float | None, local: bool = False) -> str | None:
    """ISO 8601 with its offset, for JSON and CSV (``None`` stays ``None``)."""
    if t is None:
        return None
    return dt.datetime.fromtimestamp(float(t), dt.timezone.utc).astimezone(_zone(local)).isoformat(timespec="seconds")


def relative(t: float, now: float) -> str:
    """``in 2.5 h``, ``3 min ago``, ``now``: how far ``t`` is from ``now``."""
    delta = t - now
    if abs(delta) < 60:
        return "now"
    size = f"{abs(delta) / 3600:.1f} h" if abs(delta) >= 5400 else f"{abs(delta) / 60:.0f} min"
    return f"in {size}" if delta > 0 else f"{size} ago"


def parse_time(text: str, now: float, *, local: bool, sign: int, option: str) -> float:
    """A time the user typed: a duration (``12h``, ``7d``) counted ``sign`` x from ``now``
    (+1: ahead, for deadlines; -1: back, for ``--since``), ``now``, or an ISO date/time;
    one without a zone is read as UTC, or local with ``--local-time``."""
    text = text.strip()
    if text == "now":
        return now
    try:
        return _within_span(now + sign * parse_duration(text), now, text, option)
    except GreenOptionError:
        pass
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither a duration (30m, 12h, 7d) nor an ISO time "
                                 "(2026-11-23 or 2026-11-23T14:00, UTC unless it names a zone or --local-time)",
                                 param_hint=option) from None
    try:
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc) if not local else when.astimezone()
        t = when.timestamp()
    except (OverflowError, ValueError, OSError):  # year 1 or 9999 moved to or from a local zone
        t = float("inf")
    return _within_span(t, now, text, option)


def _within_span(t: float, now: float, text: str, option: str) -> float:
    """``t`` if it lies within ``MAX_SPAN_S`` of ``now``, else click's usage error (exit 2):
    a time the commands could not show is the user's typo, not slurm-green's bug (exit 70)."""
    if not abs(t - now) <= MAX_SPAN_S:  # also refuses inf (a duration of 400 digits)
        raise click.BadParameter(f"{text!r} is more than 100 years from now", param_hint=option)
    return t
