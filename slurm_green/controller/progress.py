"""The controller's end of the jobs' own progress reports (``slurm_green.core.progress``).

Read by the resizer (``controller/resize.py``): for the checkpoint a resize waits for, and
each tick for every running elastic job, whose own estimate of its time left the policies
that resize running jobs may use to shorten Slurm's (``policy/running.py``). A report is
written by the user's process, so everything
in it is untrusted: ``ProgressReader.read`` returns a job's record only when

* the file is a regular file, opened without following a link (``O_NOFOLLOW``) and
  without blocking on a FIFO (``O_NONBLOCK``), with one link (not a hard link of
  another file);
* its owner is the job's own user (``st_uid`` of the open file against the user's uid):
  in the site's sticky directory only that user can have written or replaced it, so no
  user can report for another user's job;
* it is at most ``MAX_BYTES`` long, UTF-8 JSON with exactly the record's fields, numbers
  finite and in range, and names the job its file is named by;
* its time is not ahead of the controller's clock by more than ``max_skew_s``.

Anything else is None with one warning naming the job and why (text shown with
``displayable``), repeated only when the reason changes (the file is read every tick). A user can still report wrong numbers for their own job: what the
controller does with them has to be bounded (the models' corrections are clamped to
[1/4, 4], models/refine.py).

``forget_ended`` removes the reports of jobs that are no longer pending or running, so
the directory does not grow with every job a site ever ran: at most once per
``sweep_every_s``, only files named as a report (``<jobid>.progress.json``) and untouched
for ``keep_s`` (a job's own report is never removed while it is active). In a sticky
directory only its owner may remove other users' files, so the directory belongs to the
controller's user (``slurm-green install --print`` says so); where it does not, the
failure is logged once and nothing else changes.
"""

from __future__ import annotations

import logging
import math
import os
import pwd
from collections.abc import Callable, Collection
from pathlib import Path

from slurm_green.core import progress
from slurm_green.core.progress import JobProgress
from slurm_green.core.regular_file import open_regular
from slurm_green.core.text import displayable

log = logging.getLogger(__name__)


def uid_of(user: str) -> int | None:
    """The uid of a user name as Slurm shows it, or None if this host does not know it."""
    try:
        return pwd.getpwnam(user).pw_uid
    except (KeyError, UnicodeEncodeError, ValueError):
        return None


class ProgressReader:
    def __init__(self, directory: str | Path, max_skew_s: float = 300.0,
                 uid: Callable[[str], int | None] = uid_of, keep_s: float = 3600.0,
                 sweep_every_s: float = 600.0) -> None:
        self.directory = Path(directory)
        self.max_skew_s = max_skew_s
        self.uid = uid
        self.keep_s = keep_s
        self.sweep_every_s = sweep_every_s
        self._warned: dict[int, str] = {}  # job -> why its last report was ignored (said once)
        self._swept_at = -math.inf
        self._sweep_failed = False

    def forget_ended(self, active: Collection[int], now: float) -> int:
        """Remove the old reports of jobs not in ``active`` (see the module docstring); how many."""
        if now - self._swept_at < self.sweep_every_s:
            return 0
        self._swept_at = now
        removed = 0
        try:
            entries = list(os.scandir(self.directory))
        except OSError as exc:
            self._sweep_error(exc)
            return 0
        for entry in entries:
            job_id = _report_job(entry.name)
            if job_id is None or job_id in active:
                continue
            try:
                if now - entry.stat(follow_symlinks=False).st_mtime < self.keep_s:
                    continue
                os.unlink(entry.path)  # a link is removed, not what it points to
            except FileNotFoundError:
                continue
            except OSError as exc:
                self._sweep_error(exc)
                continue
            removed += 1
        if removed:
            log.info("removed %d progress report(s) of jobs that ended", removed)
        return removed

    def _sweep_error(self, exc: OSError) -> None:
        if not self._sweep_failed:
            self._sweep_failed = True
            log.warning("cannot remove the progress reports of ended jobs in %s (%s): the directory should "
                        "belong to the controller's user", self.directory, displayable(str(exc)))

    def read(self, job_id: int, user: str, now: float) -> JobProgress | None:
        """Job ``job_id``'s latest report if it passes every check above; None otherwise."""
        path = self.directory / progress.file_name(job_id)
        try:
            record = self._read(path, job_id, user)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self._ignored(job_id, displayable(str(exc)))
            return None
        if record.time > now + self.max_skew_s:
            self._ignored(job_id, f"dated {record.time - now:.0f} s ahead")
            return None
        self._warned.pop(job_id, None)
        return record

    def _ignored(self, job_id: int, why: str) -> None:
        if self._warned.get(job_id) != why:
            if len(self._warned) > 10_000:  # jobs long gone: forget them all rather than grow
                self._warned.clear()
            self._warned[job_id] = why
            log.warning("job %s: progress report ignored: %s", job_id, why)

    def _read(self, path: Path, job_id: int, user: str) -> JobProgress:
        owner = self.uid(user)
        if owner is None:
            raise ValueError(f"user {user!r} unknown here: cannot check who wrote {path.name}")
        with open_regular(path, follow_links=False) as handle:
            info = os.fstat(handle.fileno())
            if info.st_nlink != 1:
                raise ValueError(f"{path.name} is not a plain file (a hard link of another)")
            if info.st_uid != owner:
                raise ValueError(f"{path.name} belongs to uid {info.st_uid}, not to the job's user {user!r}")
            return progress.decode(handle.read(progress.MAX_BYTES + 1), job_id)


def _report_job(name: str) -> int | None:
    """The job a file is the report of, by its name (``progress.file_name``); None for any other name."""
    stem = name.removesuffix(progress.SUFFIX)
    return int(stem) if stem != name and stem.isascii() and stem.isdigit() else None
