"""A site's own history, from ``sacct --parsable2`` or ``sacct --json``, as a workload for what-if replays.

Text: ``sacct --parsable2`` with a header line; the columns read are JobID, Submit,
Start, Elapsed and AllocTRES or ReqTRES (at least one), and JobName and Timelimit
when present; any others are ignored. JSON: ``sacct --json`` of any supported Slurm
(read with the adapter's schema helpers, so 22.05's plain numbers and 24.11's
``{set, infinite, number}`` wrappers both work).

Only whole jobs are used (steps such as ``12.batch`` are skipped), and only jobs that
ran on GPUs: the GPU count is ``gres/gpu`` of AllocTRES (ReqTRES if absent), a job on
``gres/shard`` counts as one GPU, and the size is the elapsed time at that count
(for a job still running, the time so far).

Nothing in one line stops the others: a line with the wrong number of fields (a
``|`` inside a JobName or Comment) or a value that cannot be read is skipped, and a
:class:`~slurm_green.sim.traces.TraceWarning` names its line. sacct prints the site's
local time without a zone (give ``tz``); in the hour a DST change repeats, a time is
read as the first pass (summer time), and a time in the hour it skips is moved
forward by the gap: at most an hour off, on one night a year, counted in a warning.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from slurm_green.sim.traces import TraceError, TraceWarning
from slurm_green.sim.workload import Workload
from slurm_green.slurm.schema import epoch, integer, number, slurm_duration, text

REQUIRED = ("JobID", "Submit", "Start", "Elapsed")
GPU_COLUMNS = ("AllocTRES", "ReqTRES")
_GPU = re.compile(r"(?:^|,)gres/gpu(?::[^=,]+)?=(\d+)")
_SHARD = re.compile(r"(?:^|,)gres/shard(?::[^=,]+)?=(\d+)")
_NOT_STARTED = {"Unknown", "None", ""}
#: Warnings name at most this many lines, then count the rest.
_NAMED_LINES = 5


@dataclass(frozen=True)
class SacctHistory:
    """The GPU jobs of a sacct capture; the workload carries each job's own time limit."""

    workload: Workload

    @property
    def time_limit_s(self) -> np.ndarray:
        """Each job's limit (NaN: none or unlimited), in the workload's order."""
        given = self.workload.time_limit_s
        return np.full(len(self.workload), np.nan) if given is None else given

    def time_limit_factor(self) -> float | None:
        """The median of time limit / elapsed over jobs with a limit (at least 1), or ``None`` without one.

        A job without a limit is given its runtime times one factor by the simulator; the
        median of the site's own ratios replaces its assumed 1.5 there.
        """
        limited = np.isfinite(self.time_limit_s)
        if not limited.any():
            return None
        return max(float(np.median(self.time_limit_s[limited] / self.workload.duration_s[limited])), 1.0)


def gpus_of(alloc_tres: str, req_tres: str) -> int:
    for tres in (alloc_tres, req_tres):
        match = _GPU.search(tres or "")
        if match:
            return int(match.group(1))
    return 1 if any(_SHARD.search(t or "") for t in (alloc_tres, req_tres)) else 0


def load_sacct(path: str | Path, tz: str = "UTC") -> SacctHistory:
    """Read ``sacct --parsable2`` or ``sacct --json`` output (told apart by the first character)."""
    path = Path(path)
    content = path.read_text(encoding="utf-8", errors="replace")
    if content.lstrip().startswith("{"):
        try:
            document = json.loads(content)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{path}: not valid sacct --json output: {exc}") from None
        return _from_json(document, path)
    return _from_parsable(content, path, tz)


@dataclass
class _Rows:
    """Jobs read so far, and the lines skipped with the reason (for one warning per reason)."""

    submit: list[float]
    gpus: list[int]
    names: list[str]
    elapsed: list[float]
    limit: list[float]
    skipped: dict[str, list[str]]

    def skip(self, why: str, where: str) -> None:
        self.skipped.setdefault(why, []).append(where)

    def history(self, path: Path) -> SacctHistory:
        for why, where in self.skipped.items():
            named = ", ".join(where[:_NAMED_LINES]) + (f" and {len(where) - _NAMED_LINES} more"
                                                        if len(where) > _NAMED_LINES else "")
            warnings.warn(f"{path.name}: skipped {len(where)} line(s), {why}: {named}", TraceWarning, stacklevel=4)
        elapsed = np.asarray(self.elapsed, dtype=np.float64)
        # A job Slurm stopped at its limit ran a little past it (KillWait): its limit is raised to
        # what it ran, so that a replay never plans a job to end before it really did.
        # (np.maximum keeps NaN: a job without a limit stays without one.)
        limit = np.maximum(np.asarray(self.limit, dtype=np.float64), elapsed)
        return SacctHistory(Workload.from_columns("sacct", np.asarray(self.submit, dtype=np.float64),
                                                  np.asarray(self.gpus), self.names, duration_s=elapsed,
                                                  time_limit_s=limit))


def _from_parsable(content: str, path: Path, tz: str) -> SacctHistory:
    lines = content.splitlines()
    header = lines[0].split("|") if lines else []
    missing = [c for c in REQUIRED if c not in header]
    if missing or not any(c in header for c in GPU_COLUMNS):
        missing += [] if any(c in header for c in GPU_COLUMNS) else [" or ".join(GPU_COLUMNS)]
        raise TraceError(f"{path}: not sacct --parsable2 output with a header line (missing {', '.join(missing)}); "
                         f"run sacct --parsable2 -o {','.join(REQUIRED)},{','.join(GPU_COLUMNS)},JobName,Timelimit")
    column = {name: i for i, name in enumerate(header)}
    rows = _Rows([], [], [], [], [], {})
    local: list[datetime] = []
    for number_, line in enumerate(lines[1:], start=2):
        fields = line.split("|")
        if len(fields) != len(header):
            if line.strip():
                rows.skip(f"expected {len(header)} fields ('|' inside a name or comment?)",
                          f"line {number_} has {len(fields)}")
            continue
        job = {name: fields[i] for name, i in column.items()}
        if "." in job["JobID"] or job["Start"] in _NOT_STARTED:
            continue
        gpus = gpus_of(job.get("AllocTRES", ""), job.get("ReqTRES", ""))
        elapsed = slurm_duration(job["Elapsed"])
        try:
            submitted = datetime.strptime(job["Submit"], "%Y-%m-%dT%H:%M:%S")
        except ValueError:
            rows.skip("Submit not a time (YYYY-MM-DDTHH:MM:SS)", f"line {number_} ({job['Submit']!r})")
            continue
        if elapsed is None:
            rows.skip("Elapsed not a Slurm duration ([D-]HH:MM:SS)", f"line {number_} ({job['Elapsed']!r})")
            continue
        if gpus < 1 or elapsed <= 0:
            continue  # CPU jobs, and jobs that ended as they started: nothing to replay
        limit = slurm_duration(job.get("Timelimit", ""))
        local.append(submitted)
        rows.gpus.append(gpus)
        rows.names.append(job.get("JobName", ""))
        rows.elapsed.append(elapsed)
        rows.limit.append(np.nan if limit is None else limit)
    rows.submit = _to_utc(local, tz, path).tolist()
    return rows.history(path)


def _to_utc(local: list[datetime], tz: str, path: Path) -> np.ndarray:
    """POSIX seconds of sacct's zone-less local times; DST's repeated and skipped hours counted in a warning."""
    stamps = pd.DatetimeIndex(local, dtype="datetime64[ns]")
    summer = np.ones(len(stamps), dtype=bool)  # the repeated hour: its first pass, still summer time
    strict = stamps.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
    settled = stamps.tz_localize(tz, ambiguous=summer, nonexistent="NaT")
    utc = stamps.tz_localize(tz, ambiguous=summer, nonexistent="shift_forward")
    repeated, skipped = int((strict.isna() & ~settled.isna()).sum()), int(settled.isna().sum())
    if repeated or skipped:
        warnings.warn(f"{path.name}: {repeated} submit time(s) in the hour a DST change repeats (read as the first, "
                      f"summer-time pass), {skipped} in the hour it skips (moved forward) in {tz}",
                      TraceWarning, stacklevel=3)
    return (utc - pd.Timestamp(0, tz="UTC")).total_seconds().to_numpy()


def _from_json(document: dict[str, Any], path: Path) -> SacctHistory:
    if not isinstance(document, dict) or not isinstance(document.get("jobs"), list):
        raise TraceError(f"{path}: not sacct --json output (no 'jobs' list)")
    rows = _Rows([], [], [], [], [], {})
    for index, job in enumerate(document["jobs"]):
        times = job.get("time") or {}
        submitted, started, elapsed = epoch(times.get("submission")), epoch(times.get("start")), number(times.get("elapsed"))
        if started is None:
            continue
        if submitted is None or elapsed is None:
            rows.skip("no submission or elapsed time", f"job {text(job.get('job_id')) or f'#{index}'}")
            continue
        gpus = _json_gpus(job.get("tres") or {})
        if gpus < 1 or elapsed <= 0:
            continue
        limit_min = number(times.get("limit"))
        rows.submit.append(submitted)
        rows.gpus.append(gpus)
        rows.names.append(text(job.get("name")))
        rows.elapsed.append(float(elapsed))
        rows.limit.append(np.nan if limit_min is None else 60.0 * limit_min)
    return rows.history(path)


def _json_gpus(tres: dict[str, Any]) -> int:
    """``gres/gpu`` of the allocated TRES (requested if none), one for a ``gres/shard`` job, as in the text form."""
    def tres_text(entries: Any) -> str:
        return ",".join(f"{text(e.get('type'))}/{text(e.get('name'))}={integer(e.get('count'))}"
                        for e in entries or () if isinstance(e, dict))

    return gpus_of(tres_text(tres.get("allocated")), tres_text(tres.get("requested")))
