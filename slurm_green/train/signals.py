"""Checkpoint on Slurm's warning signal: the handler sets a flag, the training loop polls it.

Slurm sends a signal some time before it ends or requeues a job when asked to
(``sbatch --signal=USR1@120``: SIGUSR1 to every job step 120 s before the time limit;
``--signal=B:USR1@120``: to the batch script's shell only, which reaches the training
process only if the script ``exec``s it). The handler does no I/O and takes no lock:
a signal can land anywhere, inside a ``write`` or while a lock is held, so it only
records that it came. The loop asks ``should_checkpoint()`` between steps, writes its
checkpoint there, and calls ``acknowledge()``.

Python runs handlers in the main thread only; ``install`` must be called from it.
"""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any


class CheckpointSignal:
    """Whether the checkpoint signal has come since the last ``acknowledge()``."""

    def __init__(self, signum: int = signal.SIGUSR1) -> None:
        self.signum = signum
        self._pending = False
        self._previous: Any = None

    def install(self) -> CheckpointSignal:
        """Take over ``signum`` (the earlier handler is kept for ``uninstall``)."""
        self._previous = signal.signal(self.signum, self._handle)
        return self

    def uninstall(self) -> None:
        if self._previous is not None:
            signal.signal(self.signum, self._previous)
            self._previous = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._pending = True  # nothing else: see the module docstring

    def should_checkpoint(self) -> bool:
        return self._pending

    def acknowledge(self) -> None:
        """The checkpoint is written: the next signal asks again."""
        self._pending = False

