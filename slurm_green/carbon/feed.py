"""The controller's view of carbon intensity: cached, refreshed in the background, never blocking.

A :class:`CarbonFeed` owns a source (usually a fallback chain). A daemon
thread calls the source every ``refresh_interval`` seconds (sooner after a
failure) and swaps in a new immutable :class:`CarbonSnapshot`; the snapshot is
also written to a JSON file so a restarted controller has data at once.
A controller tick only calls :meth:`CarbonFeed.snapshot`, which reads one
attribute and compares two floats: it takes microseconds and never touches the
network, even while a source hangs.

Controller usage::

    feed = CarbonFeed(parse_sources(spec, secrets), cache_path=state_dir / "carbon.json")
    feed.start()
    ...
    try:
        snap = feed.snapshot()          # every tick
    except CarbonUnavailable as exc:    # no data, or older than max_age
        run_carbon_agnostic(reason=str(exc))   # jobs start; log + metric say so
    else:
        g = snap.signal.value_at(now)   # snap.source says who answered
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from slurm_green.carbon.errors import CarbonError, CarbonUnavailable, DataValidationError, SourceError
from slurm_green.carbon.failures import FailureLog, describe
from slurm_green.carbon.signal import CarbonSignal
from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.timebase import EPOCH

log = logging.getLogger(__name__)
CACHE_FORMAT = 2  #: 2: the cache names the configured source and is ignored under another
#: How far after a tick's ``now`` a snapshot may have been fetched: the tick takes ``now`` at its start
#: and reads the feed later (after asking Slurm), so a refresh may finish in between.
FUTURE_SLACK_S = 300.0


@dataclass(frozen=True, eq=False)
class CarbonSnapshot:
    """One refresh's result: the forecast as a fast signal, and where/when it came from."""

    signal: CarbonSignal
    source: str  #: which source answered (a chain member's name)
    synthetic: bool  #: the numbers are synthetic: say so in every display
    fetched_at: float  #: epoch seconds of the successful fetch
    failures: dict[str, str] = field(default_factory=dict)  #: higher-priority sources that failed

    def age(self, now: float | None = None) -> float:
        """Seconds since the fetch."""
        return (time.time() if now is None else now) - self.fetched_at


class CarbonFeed:
    """Background-refreshed, disk-cached carbon forecast with a non-blocking read."""

    def __init__(
        self,
        source: CarbonSource,
        *,
        cache_path: Path | None = None,
        refresh_interval: float = 600.0,
        retry_interval: float = 60.0,
        max_age: float = 3 * 3600.0,
        horizon: pd.Timedelta = pd.Timedelta(hours=48),
        clock: Callable[[], float] = time.time,
        read_only: bool = False,
    ) -> None:
        """``read_only``: use the disk cache but never create or write it (commands that only
        look, such as ``plan``, must leave no file behind, least of all one owned by root)."""
        self.source = source
        self.cache_path = Path(cache_path) if cache_path else None
        self.read_only = read_only
        self.refresh_interval = refresh_interval
        self.retry_interval = retry_interval
        self.max_age = max_age
        self.horizon = horizon
        self._clock = clock
        self._snapshot: CarbonSnapshot | None = self._load_cache()
        self._last_error: CarbonError | None = None
        self._failures = FailureLog(
            log,
            failing=f"no carbon data from {{name}} (carbon-agnostic once the last forecast is {max_age:.0f} s old): "
                    "{why}",
            back="carbon data from {name} again",
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def snapshot(self, now: float | None = None) -> CarbonSnapshot:
        """The current snapshot, without blocking; raises :class:`CarbonUnavailable` if none is fresh."""
        snap = self._snapshot
        if snap is None:
            raise self._unavailable("no carbon data yet")
        now = self._clock() if now is None else now
        age = now - snap.fetched_at
        if age > self.max_age:
            raise self._unavailable(f"carbon data from {snap.source} is {age:.0f} s old")
        if not age >= -FUTURE_SLACK_S:  # also NaN: a cache's fetched_at is whatever the file says
            # The clock went back (or the cache was written by one running ahead): "how old" is
            # unknown, and a negative age would pass as fresh for as long as the jump was.
            raise self._unavailable(f"carbon data from {snap.source} was fetched {-age:.0f} s after now "
                                    "(the clock went back?): its age is unknown")
        return snap

    @property
    def horizon_s(self) -> float:
        """The horizon in seconds: each tick compares the forecast's end with now plus this
        (``controller/tick.py``, which keeps to epoch seconds)."""
        return float(self.horizon.total_seconds())

    @property
    def last_error(self) -> CarbonError | None:
        """The error of the latest refresh, or ``None`` if it succeeded."""
        return self._last_error

    def refresh(self) -> CarbonSnapshot:
        """Fetch now (blocking; the background thread and the CLI call this).

        Raises only :class:`CarbonError`: whatever a source does, including
        answering numbers the signal cannot hold, the caller sees one typed error,
        and the failure is logged once per change (see :mod:`.failures`).
        """
        fetched_at = self._clock()
        try:
            answer = self.source.answer(self.horizon, now=EPOCH + pd.Timedelta(seconds=fetched_at))
            signal = CarbonSignal.from_series(answer.series)
        except Exception as exc:
            error = exc if isinstance(exc, CarbonError) else _as_carbon_error(exc, self.source.name)
            self._last_error = error
            self._failures.failed(self.source.name, exc)
            raise error from None
        snap = CarbonSnapshot(signal, answer.source, answer.synthetic, fetched_at, answer.failures)
        self._snapshot = snap
        self._last_error = None
        self._failures.answered(self.source.name)
        self._write_cache(snap)
        return snap

    def start(self) -> None:
        """Start the background refresh thread (idempotent)."""
        if self._thread and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="carbon-feed", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the thread to stop and wait up to ``timeout`` (a hung fetch is abandoned, it is a daemon)."""
        self._stop.set()
        if self._thread:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                snap = self.refresh()
                log.debug("carbon forecast refreshed from %s", snap.source)
                wait = self.refresh_interval
            except CarbonError:  # logged by refresh, once per change
                wait = self.retry_interval
            except Exception:  # the thread must survive anything
                log.exception("carbon refresh crashed")
                wait = self.retry_interval
            self._stop.wait(wait)

    def _unavailable(self, what: str) -> CarbonUnavailable:
        error = self._last_error
        reasons = getattr(error, "reasons", {}) or ({self.source.name: str(error)} if error else {})
        detail = f"; last refresh: {error}" if error else ""
        return CarbonUnavailable(f"{what}{detail}", reasons)

    def _write_cache(self, snap: CarbonSnapshot) -> None:
        if not self.cache_path or self.read_only:
            return
        payload = {
            "format": CACHE_FORMAT,
            "configured": self.source.name,
            "source": snap.source,
            "synthetic": snap.synthetic,
            "fetched_at": snap.fetched_at,
            "starts": snap.signal.starts.tolist(),
            "values": snap.signal.values.tolist(),
        }
        try:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(payload))
            os.replace(tmp, self.cache_path)
        except OSError as exc:
            log.warning("cannot write carbon cache %s: %s", self.cache_path, exc)

    def _load_cache(self) -> CarbonSnapshot | None:
        if not self.cache_path or not self.cache_path.exists():
            return None
        try:
            payload = json.loads(self.cache_path.read_text())
            if payload["format"] != CACHE_FORMAT:
                raise ValueError(f"format {payload['format']}")
            if payload["configured"] != self.source.name:
                # Written under other sources (say, synthetic before the admin removed it): not ours to serve.
                log.info("carbon cache %s is from sources %r, not %r: ignored",
                         self.cache_path, payload["configured"], self.source.name)
                return None
            index = pd.DatetimeIndex(EPOCH + pd.to_timedelta(np.asarray(payload["starts"]), unit="s"))
            signal = CarbonSignal.from_series(pd.Series(payload["values"], index=index))
            return CarbonSnapshot(signal, payload["source"], bool(payload["synthetic"]), float(payload["fetched_at"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable carbon cache %s: %s", self.cache_path, exc)
            return None


def _as_carbon_error(exc: Exception, name: str) -> CarbonError:
    """A non-carbon exception from a source or from building the signal, as the carbon error it means."""
    if isinstance(exc, ValueError):  # the signal refused the numbers
        return DataValidationError(f"{name}: unusable forecast: {exc}")
    return SourceError(f"{name}: {describe(exc)}")
