"""A running job's own progress report: what the training helper (``slurm_green.train``)
writes and the controller reads.

Why: a job's work rate cannot be seen from outside it (the Epilog meters energy, not
samples), so the models can learn only its power. The job itself says how far it is, one
small JSON file per job, ``<job id>.progress.json``, in a directory the nodes and the
controller both reach (``<telemetry_dir>/progress`` by default, beside the Epilogs'
energy records). Unlike those, this file is written by the *user's* process: it is
untrusted input. This module is the one definition of the format, both ends use it;
``decode`` refuses anything that is not exactly a record (size bound, UTF-8, types,
ranges, the job id its file is named by).

Format 2 adds ``checkpoint``: when the job's latest complete checkpoint was written (Unix
seconds; 0 for none). The controller's resize (``controller/resize.py``) signals a job
(SIGUSR2: checkpoint and go on) and requeues it only once a report names a checkpoint
written after its signal. ``decode`` still reads format 1
(exactly its keys, ``checkpoint`` 0), so jobs running an older helper keep reporting.

Format 3 adds ``total``: the units the job will have done when it ends (0: not known),
so ``(total - done) / per_s`` is its own estimate of the time it has left. A user can
write any number there; the controller only ever lets it *shorten* what Slurm's time
limit says (``policy/running.py``), so a report can make its own job look closer to its
end, never another job's decision change. ``encode`` writes format 3; formats 1 and 2 are
still read (``total`` 0). Ownership is checked by the reader
(``controller/progress.py``); nothing here touches the disk.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

SUFFIX = ".progress.json"
#: A record is about 180 bytes; anything longer than this is not one.
MAX_BYTES = 4096
UNITS = ("samples", "steps")
FORMAT = 3
#: The exact keys of each format ``decode`` reads.
KEYS = {
    1: frozenset({"format", "job_id", "unit", "done", "per_s", "frozen", "time"}),
    2: frozenset({"format", "job_id", "unit", "done", "per_s", "frozen", "time", "checkpoint"}),
    3: frozenset({"format", "job_id", "unit", "done", "per_s", "frozen", "time", "checkpoint", "total"}),
}


@dataclass(frozen=True, slots=True)
class JobProgress:
    """How far job ``job_id`` is: ``done`` units (``samples`` or ``steps``) so far, its recent
    rate ``per_s``, the frozen share of its blocks ``frozen`` (models/freezing.py's ``f``),
    the wall-clock ``time`` (Unix seconds) it was measured at and ``checkpoint``, the
    wall-clock time its latest complete checkpoint was written (0.0: none reported; never
    after ``time``, so the reader's bound on ``time`` bounds it too) and ``total``, the units
    it will have done at its end (0.0: not known)."""

    job_id: int
    unit: str
    done: float
    per_s: float
    frozen: float
    time: float
    checkpoint: float = 0.0
    total: float = 0.0

    def __post_init__(self) -> None:
        if type(self.job_id) is not int or self.job_id <= 0:
            raise ValueError(f"job id {self.job_id!r}: expected a positive integer")
        if self.unit not in UNITS:
            raise ValueError(f"unit {self.unit!r}: expected one of {', '.join(UNITS)}")
        for name in ("done", "per_s", "frozen", "time", "checkpoint", "total"):
            _check_number(name, getattr(self, name))
        if self.frozen > 1:
            raise ValueError(f"frozen {self.frozen!r}: expected a share in [0, 1]")
        if self.checkpoint > self.time:
            raise ValueError(f"checkpoint {self.checkpoint!r}: after the record's time {self.time!r}")

    @property
    def file_name(self) -> str:
        return file_name(self.job_id)

    def time_left_s(self, now: float) -> float | None:
        """The job's own estimate of its time left at ``now``: its units to go at its rate,
        less the time since the report; None without a total or a rate."""
        if self.total <= 0 or self.per_s <= 0:
            return None
        return max(0.0, (self.total - self.done) / self.per_s - max(0.0, now - self.time))


def _check_number(name: str, value: object) -> None:
    """A finite number >= 0; JSON's true/false and integers too large for a float are not."""
    try:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    except OverflowError:
        ok = False
    if not ok:
        raise ValueError(f"{name} {str(value)[:40]!r}: expected a finite number >= 0")


def file_name(job_id: int) -> str:
    return f"{job_id}{SUFFIX}"


def encode(record: JobProgress) -> bytes:
    return json.dumps({"format": FORMAT, **asdict(record)}, sort_keys=True).encode()


def decode(data: bytes, job_id: int) -> JobProgress:
    """The record in ``data`` if it is exactly one for ``job_id``; ``ValueError`` otherwise."""
    if len(data) > MAX_BYTES:
        raise ValueError(f"{len(data)} bytes: a progress record is at most {MAX_BYTES}")
    try:
        fields = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"not a JSON progress record ({type(exc).__name__})") from None
    version = fields.get("format") if isinstance(fields, dict) else None
    if type(version) is not int or version not in KEYS or set(fields) != KEYS[version]:
        raise ValueError(f"not a progress record of format {FORMAT} (keys: {', '.join(sorted(KEYS[FORMAT]))}) "
                         f"or an older one (1: without checkpoint, 2: without total)")
    del fields["format"]
    record = JobProgress(**fields)
    if record.job_id != job_id:
        raise ValueError(f"a record of job {record.job_id} in job {job_id}'s file")
    return record


@dataclass(frozen=True, slots=True)
class MeasuredRate:
    """What a running job's own reports said of its rate while it ran on ``gpus`` GPUs of one
    node: the mean ``per_s`` of ``readings`` reports, all in ``unit`` at frozen share
    ``frozen`` (the controller keeps one per job and GPU count: ``controller/resize.py``).
    Two of them, at two counts, measure how the job really scales (``models/measured.py``)."""

    gpus: int
    unit: str
    frozen: float
    per_s: float
    readings: int
