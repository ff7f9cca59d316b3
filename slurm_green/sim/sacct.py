"""A site's own history, from ``sacct --parsable2``, as a workload for what-if replays.

Expected columns (header line required): JobID|JobName|User|Account|Partition|State|
Submit|Eligible|Start|End|Elapsed|Timelimit|NNodes|AllocTRES|ReqTRES|Comment.
Only whole jobs are used (steps such as ``12.batch`` are skipped), and only jobs that
ran on GPUs: the GPU count is ``gres/gpu`` of AllocTRES (ReqTRES if absent), a job on
``gres/shard`` counts as one GPU, and the size is the elapsed time at that count
(for a job still running, the time so far). sacct prints the site's local time
without a zone: give ``tz`` (default UTC).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from slurm_green.sim.workload import Workload

REQUIRED = ("JobID", "JobName", "Submit", "Start", "Elapsed", "AllocTRES", "ReqTRES")
_GPU = re.compile(r"(?:^|,)gres/gpu(?::[^=,]+)?=(\d+)")
_SHARD = re.compile(r"(?:^|,)gres/shard(?::[^=,]+)?=(\d+)")


def parse_elapsed(text: str) -> float:
    """Slurm durations: ``[D-]HH:MM:SS``, ``MM:SS`` or ``MM:SS.mmm``."""
    days, _, clock = text.strip().rpartition("-")
    parts = [float(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    hours, minutes, seconds = parts
    return (int(days) if days else 0) * 86400.0 + hours * 3600.0 + minutes * 60.0 + seconds


def gpus_of(alloc_tres: str, req_tres: str) -> int:
    for tres in (alloc_tres, req_tres):
        match = _GPU.search(tres or "")
        if match:
            return int(match.group(1))
    return 1 if any(_SHARD.search(t or "") for t in (alloc_tres, req_tres)) else 0


def load_sacct(path: str | Path, tz: str = "UTC") -> Workload:
    frame = pd.read_csv(path, sep="|", dtype=str, keep_default_na=False)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: not sacct --parsable2 output with the expected columns (missing {missing})")
    frame = frame[~frame.JobID.str.contains(r"\.")]
    frame = frame[~frame.Start.isin(["Unknown", "None", ""])]
    gpus = np.array([gpus_of(a, r) for a, r in zip(frame.AllocTRES, frame.ReqTRES)], dtype=np.int64)
    elapsed = np.array([parse_elapsed(e) for e in frame.Elapsed])
    keep = (gpus > 0) & (elapsed > 0)
    frame = frame[keep]
    submit = pd.to_datetime(frame.Submit, format="%Y-%m-%dT%H:%M:%S").dt.tz_localize(tz).dt.tz_convert("UTC")
    epoch = (submit - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    return Workload.from_columns("sacct", epoch, gpus[keep], frame.JobName.tolist(), duration_s=elapsed[keep])
