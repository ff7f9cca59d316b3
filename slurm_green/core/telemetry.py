"""Metered GPU energy of one finished job on one node: what the Epilog hands the controller.

Why a directory of files: the Epilog runs on compute nodes as root and the job record in
slurmctld can no longer be changed once the job has ended ("Job has already finished"),
so the measurement travels outside Slurm. The Epilog writes one small JSON file per job,
node and run (a requeued job runs again under its id) into a directory that nodes and controller both reach (a shared filesystem at a
site, a shared volume in the Docker cluster); the controller reads a job's files once
every node of the job has written its own, folds them into the models and the job's
record, and removes them. Files are written under a temporary name and renamed, so a
reader never sees half of one. Only root (the Epilog) should be able to write there: the
controller trusts what it reads.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

SUFFIX = ".energy.json"


@dataclass(frozen=True, slots=True)
class NodeEnergy:
    """GPU energy a job drew on one node, between its Prolog and its Epilog.

    ``shared``: another job held one of these GPUs meanwhile (gres/shard), so the
    energy is not this job's alone and must not teach the models. ``board_*_w``: the
    power-limit range and default NVML reports for the node's GPUs, so the models learn
    each board's real range (``FittedRegistry.observe_board``); None from an older Epilog.
    ``started_at``: when this run of the job started on the node (its Prolog's time), so a job
    that runs again under the same id (requeued, resized) leaves a record per run, under a name
    of its own; None from an older Epilog (``<job>.<node>.energy.json``, one name for every run).
    """

    job_id: int
    node: str
    gpus: int
    energy_j: float
    seconds: float
    shared: bool = False
    board_min_w: float | None = None
    board_max_w: float | None = None
    board_default_w: float | None = None
    started_at: float | None = None

    def __post_init__(self) -> None:
        numbers = (self.energy_j, self.seconds) + (() if self.started_at is None else (self.started_at,))
        if self.job_id <= 0 or self.gpus <= 0 or not self.node or "/" in self.node:
            raise ValueError(f"job {self.job_id}, node {self.node!r}, {self.gpus} GPUs: not a measurement")
        if not all(math.isfinite(x) and x >= 0 for x in numbers):
            raise ValueError(f"energy {self.energy_j!r} J over {self.seconds!r} s: not a measurement")
        board = (self.board_min_w, self.board_default_w, self.board_max_w)
        if board != (None, None, None) and not _is_board(*board):
            raise ValueError(f"board limits {board!r} W (min, default, max): not a board")

    @property
    def file_name(self) -> str:
        """``<job>.<node>.<run start, s>.energy.json``; an older Epilog's ``<job>.<node>.energy.json``."""
        if self.started_at is None:
            return f"{self.job_id}.{self.node}{SUFFIX}"
        return f"{self.job_id}.{self.node}.{int(self.started_at)}{SUFFIX}"


def _is_board(min_w: float | None, default_w: float | None, max_w: float | None) -> bool:
    """Board limits (W) as NVML reports them: all known, finite, 0 < min <= default <= max."""
    if min_w is None or default_w is None or max_w is None:
        return False
    return all(math.isfinite(w) for w in (min_w, default_w, max_w)) and 0 < min_w <= default_w <= max_w


def write(directory: Path, record: NodeEnergy) -> Path:
    """Write ``record`` whole (temporary file, then rename); returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".", suffix=".tmp")
    # mkstemp makes it 0600 and the controller reads it as another user. Through the open file,
    # never by name: the directory's owner (the service user) could swap the name for a link
    # to a file of root's, which root would then make readable to all.
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w") as handle:
        json.dump(asdict(record), handle, sort_keys=True)
    target = directory / record.file_name
    os.replace(tmp, target)
    return target


def read(path: Path) -> NodeEnergy:
    """One record; ``ValueError`` if the file is not one, ``OSError`` if it cannot be read."""
    text = path.read_text()
    try:
        data = json.loads(text)
        return NodeEnergy(
            job_id=int(data["job_id"]), node=str(data["node"]), gpus=int(data["gpus"]),
            energy_j=float(data["energy_j"]), seconds=float(data["seconds"]), shared=bool(data.get("shared", False)),
            **{k: float(data[k]) for k in ("board_min_w", "board_max_w", "board_default_w", "started_at")
               if data.get(k) is not None},
        )
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not an energy record ({exc})") from exc
