"""Saying once that a carbon source fails, and once that it is back.

Sources are asked every refresh (every minute while failing); a failure that
lasts a week must not fill the log, yet every change must be seen. A failure is
identified by its kind: the exception type and its message with the numbers
masked, so "data is 3605 s old" and "data is 3665 s old" are one failure, while
"permission denied" followed by "unknown CSV layout" are two. Every failure is
still logged at DEBUG.
"""

from __future__ import annotations

import logging
import re

from slurm_green.carbon.errors import CarbonError

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def describe(exc: BaseException) -> str:
    """One line: the error type and message (an unexpected, non-carbon error is marked so)."""
    prefix = "" if isinstance(exc, CarbonError) else "unexpected "
    return f"{prefix}{type(exc).__name__}: {exc}"


def kind_of(exc: BaseException) -> str:
    """What stays the same while a failure goes on: the description with every number masked."""
    return _NUMBER.sub("#", describe(exc))


class FailureLog:
    """Per source: the kind of its current failure; logs only the changes.

    ``failing`` and ``back`` are the messages, formatted with ``name`` (and
    ``why`` for a failure).
    """

    def __init__(
        self,
        log: logging.Logger,
        failing: str = "carbon source {name} failing, falling through to the next: {why}",
        back: str = "carbon source {name} answers again",
    ) -> None:
        self._log = log
        self._failing = failing
        self._back = back
        self._current: dict[str, str] = {}

    def failed(self, name: str, exc: BaseException) -> None:
        """Record a failure of ``name``; a warning when it is new or of another kind."""
        kind = kind_of(exc)
        if self._current.get(name) == kind:
            self._log.debug("carbon source %s still failing: %s", name, describe(exc))
            return
        self._current[name] = kind
        message = self._failing.format(name=name, why=describe(exc))
        if isinstance(exc, CarbonError):
            self._log.warning("%s", message)
        else:  # a bug: the traceback helps whoever fixes it
            self._log.error("%s", message, exc_info=exc)

    def answered(self, name: str) -> None:
        """Record that ``name`` answered; said once if it had been failing."""
        if self._current.pop(name, None) is not None:
            self._log.info("%s", self._back.format(name=name))
