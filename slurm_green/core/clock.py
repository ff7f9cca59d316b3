"""Injected time: the controller never calls ``time.time()`` itself.

The real daemon uses ``SystemClock``; tests and the simulator use a clock they move.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """POSIX seconds, UTC."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to (tests, simulation)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def set(self, t: float) -> None:
        if t < self._now:
            raise ValueError(f"time cannot go backwards: {t} < {self._now}")
        self._now = t

    def advance(self, seconds: float) -> None:
        self.set(self._now + seconds)
