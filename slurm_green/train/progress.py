"""Write a job's progress where the controller reads it (format: ``slurm_green.core.progress``).

Where: ``$SLURM_GREEN_PROGRESS_DIR``, else ``<SLURM_GREEN_TELEMETRY_DIR>/progress`` from the
node's settings (``/etc/slurm-green/gpu.conf``, the directory the Epilog leaves energy in).
The site makes that directory owned by the controller's user with mode 1733: any user may
create files, none may list it, and the sticky bit keeps a user from replacing or removing
another user's file. The controller accepts a job's file only if the job's own user owns
it (controller/progress.py), so a user can report only on their own jobs.

Each write is whole: a temporary file in the same directory, made readable (0644), then
renamed over the job's file. A report that cannot be written is logged once and skipped:
progress reports must never stop a training run.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from slurm_green.core import progress
from slurm_green.core.progress import JobProgress
from slurm_green.train.checkpoint import atomic_write

log = logging.getLogger(__name__)

DIR_ENV = "SLURM_GREEN_PROGRESS_DIR"


def progress_dir(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The directory reports go to, or None when the site has none."""
    if environ.get(DIR_ENV):
        return Path(environ[DIR_ENV])
    from slurm_green.gpu.settings import load_settings

    try:
        telemetry = load_settings(environ).telemetry_dir
    except (OSError, ValueError) as exc:
        log.warning("no progress reports: the node settings are unreadable (%s)", exc)
        return None
    return telemetry / "progress" if telemetry is not None else None


def write(directory: Path, record: JobProgress) -> Path:
    """Write ``record`` whole (``atomic_write``); returns its path; ``OSError`` on failure.
    Mode 0644: the controller reads it as another user."""
    data = progress.encode(record)

    def put(handle: BinaryIO) -> None:
        handle.write(data)

    return atomic_write(directory / record.file_name, put, mode=0o644)


class ProgressReporter:
    """Call ``update(done, frozen)`` as often as you like; it writes at most every ``every_s``.

    The rate written is the units done per second since the previous write (the first call
    only starts the clock). After writing a checkpoint whole, call ``update(done, frozen,
    checkpointed=True)``: the reporter takes its clock's now as the checkpoint's time
    (``checkpoint_time``; every later report carries it) and writes at once, whatever
    ``every_s``, even on the first call (with a rate of 0: none is known yet). A forced
    report with no new units since the last (a checkpoint right after a report) repeats the
    last rate instead of writing 0. Disabled (every call returns None) without a directory
    or a job id. ``total``: the units the job will have done at its end, when the loop knows
    (0: not known); the controller then sees the job's own estimate of its time left.
    """

    def __init__(self, directory: Path | None, job_id: int | None, unit: str = "samples",
                 every_s: float = 30.0, clock: Callable[[], float] = time.time, total: float = 0.0) -> None:
        if unit not in progress.UNITS:
            raise ValueError(f"unit {unit!r}: expected one of {', '.join(progress.UNITS)}")
        self.directory, self.job_id, self.unit, self.every_s, self.clock = directory, job_id, unit, every_s, clock
        self._last: tuple[float, float] | None = None  # (time, done) of the last write or the first call
        self._rate = 0.0                               # the rate last written
        self.checkpoint_time = 0.0                     # the latest checkpoint's, as reported; 0: none yet
        self.total = total
        self._warned = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ, **kwargs: Any) -> ProgressReporter:
        """A reporter for the Slurm job this process runs in (``SLURM_JOB_ID``); ``kwargs``: the
        constructor's other arguments."""
        job = environ.get("SLURM_JOB_ID", "")
        return cls(progress_dir(environ), int(job) if job.isdigit() else None, **kwargs)

    @property
    def enabled(self) -> bool:
        return self.directory is not None and self.job_id is not None

    def update(self, done: float, frozen: float = 0.0, force: bool = False,
               checkpointed: bool = False) -> Path | None:
        """Report ``done`` units so far at frozen share ``frozen``; ``force``: write now, whatever
        ``every_s``; ``checkpointed``: a checkpoint was just written whole (implies ``force``).
        The path written, or None."""
        directory, job_id = self.directory, self.job_id
        if directory is None or job_id is None:  # not ``enabled``
            return None
        now = self.clock()
        if checkpointed:
            self.checkpoint_time = now
            force = True
        if self._last is None:
            self._last = (now, done)
            if not checkpointed:
                return None
        then, before = self._last
        if not checkpointed and (now <= then or (now - then < self.every_s and not force)):
            return None
        if now > then and (done != before or not force):
            rate, last = max(done - before, 0.0) / (now - then), (now, done)
        else:  # nothing new since the last write: its rate and its window stand
            rate, last = self._rate, self._last
        record = JobProgress(job_id, self.unit, done, rate, frozen, now, min(self.checkpoint_time, now), self.total)
        try:
            path = write(directory, record)
        except OSError as exc:
            if not self._warned:
                log.warning("cannot write progress to %s (%s); training goes on without reports", self.directory, exc)
                self._warned = True
            return None
        self._last, self._rate = last, rate
        return path
