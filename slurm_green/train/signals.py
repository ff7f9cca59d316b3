"""Checkpoint on a signal: the handler counts what came, the training loop polls between steps.

Two requests, told apart by the signal:

* **stop** (SIGUSR1 by default): Slurm's warning before the time limit, when asked for
  (``sbatch --signal=USR1@120``: SIGUSR1 to every job step 120 s before it;
  ``--signal=B:USR1@120``: to the batch script's shell only, which reaches the training
  process only if the script ``exec``s it). Write a checkpoint and end the loop.
* **keep going** (SIGUSR2 by default): the controller's resize (``scancel --signal=USR2``,
  to the job steps). Write a checkpoint, report it (``ProgressReporter.update(...,
  checkpointed=True)``) and train on. If the controller then requeues the job, at most the
  work since that checkpoint is done again; if it does not, nothing is lost.

The handler does no I/O and takes no lock: a signal can land anywhere, inside a ``write``
or while a lock is held, so it only counts that it came. The loop calls ``take()`` between
steps: the request (stop wins when both came), cleared as it is taken, so a signal landing
while the checkpoint is written asks again at the next step instead of being lost.
(``should_checkpoint()`` and ``acknowledge()``, poll then clear, remain for loops written
against them: a signal between the two is cleared unanswered.)

Python runs handlers in the main thread only; ``install`` must be called from it.
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Collection
from types import FrameType
from typing import Any


class Request(enum.Enum):
    """What a checkpoint signal asks for."""

    STOP = "stop"              # checkpoint, then end the loop
    KEEP_GOING = "keep going"  # checkpoint, report it, train on


class CheckpointSignal:
    """Which checkpoint request has come since it was last taken: ``stop`` lists the signals
    meaning *stop*, ``keep_going`` those meaning *keep going* (either may be empty; a signal
    may not be in both)."""

    def __init__(self, stop: Collection[int] = (signal.SIGUSR1,),
                 keep_going: Collection[int] = (signal.SIGUSR2,)) -> None:
        if isinstance(stop, int) or isinstance(keep_going, int):
            raise TypeError("stop and keep_going are collections of signals, e.g. (signal.SIGUSR1,)")
        both = set(stop) & set(keep_going)
        if both:
            raise ValueError(f"signal(s) {', '.join(signal.Signals(s).name for s in sorted(both))} "
                             f"both stop and keep going")
        self.kinds: dict[int, Request] = {s: Request.STOP for s in stop} | {s: Request.KEEP_GOING for s in keep_going}
        # Counts: the handler only adds to ``_came``, the loop only copies it into ``_taken``,
        # so no update of one side can overwrite the other's.
        self._came = {kind: 0 for kind in Request}
        self._taken = dict(self._came)
        self._previous: dict[int, Any] = {}

    def install(self) -> CheckpointSignal:
        """Take over the signals (the earlier handlers are kept for ``uninstall``)."""
        for signum in self.kinds:
            if signum not in self._previous:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def uninstall(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._came[self.kinds[signum]] += 1  # nothing else: see the module docstring

    def requested(self) -> Request | None:
        """The pending request (``STOP`` if both are), without clearing it."""
        for kind in (Request.STOP, Request.KEEP_GOING):
            if self._came[kind] != self._taken[kind]:
                return kind
        return None

    def take(self) -> Request | None:
        """The pending request, cleared: a signal after this call is a new request. A stop
        taken clears a pending keep-going too (its checkpoint answers both)."""
        came = dict(self._came)  # one snapshot: what comes after it stays pending
        kind = next((k for k in (Request.STOP, Request.KEEP_GOING) if came[k] != self._taken[k]), None)
        if kind is Request.STOP:
            self._taken = came
        elif kind is Request.KEEP_GOING:
            self._taken[kind] = came[kind]
        return kind

    def should_checkpoint(self) -> bool:
        """Whether any request is pending (not cleared)."""
        return self.requested() is not None

    def acknowledge(self) -> None:
        """The checkpoint is written: every pending request is answered."""
        self._taken = dict(self._came)
