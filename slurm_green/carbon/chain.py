"""A fallback chain of sources: the first healthy one answers, and we record which.

"Healthy" means it returned a validated forecast without raising. Failures of
the others are kept (source name -> reason) so ``carbon check``, logs and
metrics can say why a lower-priority source was used. If every source fails,
:class:`~slurm_green.carbon.errors.CarbonUnavailable` carries all the reasons.

A source failing is logged once when it starts failing or fails differently, and
once when it answers again, not at every refresh: a file left broken for a week
must not write a warning every minute, and a recovery must not go unsaid.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pandas as pd

from slurm_green.carbon.answer import Answer
from slurm_green.carbon.errors import CarbonError, CarbonUnavailable
from slurm_green.carbon.failures import FailureLog, describe
from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.timebase import as_utc

log = logging.getLogger(__name__)


class FallbackChain(CarbonSource):
    """Try sources in order; the first that answers wins."""

    def __init__(self, sources: Sequence[CarbonSource]) -> None:
        if not sources:
            raise ValueError("a fallback chain needs at least one source")
        self.sources = list(sources)
        self.name = ",".join(s.name for s in self.sources)
        self.synthetic = all(s.synthetic for s in self.sources)
        self._failures = FailureLog(log)

    def answer(self, horizon: pd.Timedelta, now: pd.Timestamp | None = None) -> Answer:
        now = as_utc(now)
        failures: dict[str, str] = {}
        for source in self.sources:
            try:
                answer = source.answer(horizon, now=now)
            except Exception as exc:  # a bug in one source must not hide the others
                failures[source.name] = describe(exc)
                self._failures.failed(source.name, exc)
            else:
                self._failures.answered(source.name)
                return Answer(answer.series, answer.source, answer.synthetic, {**failures, **answer.failures})
        raise CarbonUnavailable(
            "every carbon source failed: " + "; ".join(f"{k}: {v}" for k, v in failures.items()), failures
        )

    def forecast(self, horizon: pd.Timedelta, now: pd.Timestamp | None = None) -> pd.Series:
        return self.answer(horizon, now=now).series

    def history(self, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
        failures: dict[str, str] = {}
        for source in self.sources:
            try:
                return source.history(start, end)
            except CarbonError as exc:
                failures[source.name] = describe(exc)
        raise CarbonUnavailable("no source has history: " + "; ".join(failures.values()), failures)
