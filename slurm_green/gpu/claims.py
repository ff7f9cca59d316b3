"""Which running jobs hold which GPUs of this node, and the limit each GPU had before.

One small JSON file per job, ``<state_dir>/jobs/<jobid>.json``, written by the Prolog
and removed by the Epilog, all under one node-wide lock. A GPU shared by several jobs
(gres/shard) is held by all of them; its *baseline* (the limit found when the first
of them started) is copied into every later holder's record, so whichever job ends
last restores it. Records from an earlier boot are dropped: a reboot resets the limits.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str:
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class GpuClaim:
    """``baseline_w``: the GPU's limit before any current holder; ``want_w``: this job's wish."""

    baseline_w: float
    want_w: float


@dataclass(slots=True)
class JobClaims:
    job_id: int
    gpus: dict[int, GpuClaim] = field(default_factory=dict)
    energy_start_j: dict[int, float] = field(default_factory=dict)
    boot: str = field(default_factory=boot_id)
    #: When the Prolog claimed the GPUs, and whether another job has held one of them since
    #: (set by this Prolog, or by a later job's Prolog on a shared GPU).
    started_at: float | None = field(default_factory=time.time)
    shared: bool = False

    def to_json(self) -> str:
        return json.dumps({
            "job_id": self.job_id,
            "boot": self.boot,
            "gpus": {str(m): {"baseline_w": c.baseline_w, "want_w": c.want_w} for m, c in self.gpus.items()},
            "energy_start_j": {str(m): e for m, e in self.energy_start_j.items()},
            "started_at": self.started_at,
            "shared": self.shared,
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "JobClaims":
        data = json.loads(text)
        return cls(
            job_id=int(data["job_id"]),
            gpus={int(m): GpuClaim(float(c["baseline_w"]), float(c["want_w"])) for m, c in data["gpus"].items()},
            energy_start_j={int(m): float(e) for m, e in data.get("energy_start_j", {}).items()},
            boot=str(data.get("boot", "")),
            started_at=float(data["started_at"]) if data.get("started_at") is not None else None,
            shared=bool(data.get("shared", False)),
        )


class ClaimStore:
    def __init__(self, jobs_dir: str | Path) -> None:
        self.dir = Path(jobs_dir)

    @contextmanager
    def locked(self) -> Iterator["ClaimStore"]:
        """Hold the node-wide lock: Prologs and Epilogs of concurrent jobs take turns."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o755)
        with open(self.dir / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield self

    def _path(self, job_id: int) -> Path:
        return self.dir / f"{job_id}.json"

    def load(self, job_id: int) -> JobClaims | None:
        try:
            return JobClaims.from_json(self._path(job_id).read_text())
        except FileNotFoundError:
            return None

    def others(self, job_id: int) -> list[JobClaims]:
        """Records of the other jobs of this boot; unreadable and earlier-boot ones are removed."""
        current, records = boot_id(), []
        for path in self.dir.glob("*.json"):
            try:
                record = JobClaims.from_json(path.read_text())
            except (OSError, ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)
                continue
            if record.boot != current:
                path.unlink(missing_ok=True)
            elif record.job_id != job_id:
                records.append(record)
        return sorted(records, key=lambda r: r.job_id)

    def save(self, claims: JobClaims) -> None:
        tmp = self._path(claims.job_id).with_suffix(".tmp")
        tmp.write_text(claims.to_json())
        os.replace(tmp, self._path(claims.job_id))

    def remove(self, job_id: int) -> None:
        self._path(job_id).unlink(missing_ok=True)
