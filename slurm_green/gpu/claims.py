"""Which running jobs hold which GPUs of this node, and the limit each GPU had before.

One small JSON file per job, ``<state_dir>/jobs/<jobid>.json``, written by the Prolog
and removed by the Epilog, all under one node-wide lock. A GPU shared by several jobs
(gres/shard) is held by all of them; its *baseline* (the limit found when the first
of them started) is copied into every later holder's record, so whichever job ends
last restores it. Records from an earlier boot are dropped: a reboot resets the limits.

Two safety nets keep a limit from staying changed after its last job left when an
Epilog did not finish (its record lost or unreadable, NVML refusing, a hung lock or
NVML call that got it killed):

* ``baselines``: the baseline of every GPU some job holds, kept apart from the job
  records, so an Epilog without its record still knows what to restore; an entry goes
  only once its GPU has its baseline back.
* ``<jobid>.ended``: the Epilog marks its job ended (with its pid) before it takes the
  lock; if that process dies before it is done (killed waiting for a hung lock or NVML),
  or fails (it then marks the job ended naming no process, epilog.py), the next Prolog or
  Epilog on the node releases the job's claims, and GPUs no live job holds get their
  baseline back (``enact.heal``).
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
    """``energy_mark_j``: each GPU's energy counter when its holders last changed;
    ``energy_j``: what the GPU drew for this job up to that mark (``split_energy``). A GPU
    missing from ``energy_mark_j`` had a counter that could not be read: its energy is unknown."""

    job_id: int
    gpus: dict[int, GpuClaim] = field(default_factory=dict)
    energy_mark_j: dict[int, float] = field(default_factory=dict)
    energy_j: dict[int, float] = field(default_factory=dict)
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
            "energy_mark_j": {str(m): e for m, e in self.energy_mark_j.items()},
            "energy_j": {str(m): e for m, e in self.energy_j.items()},
            "started_at": self.started_at,
            "shared": self.shared,
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "JobClaims":
        data = json.loads(text)
        return cls(
            job_id=int(data["job_id"]),
            gpus={int(m): GpuClaim(float(c["baseline_w"]), float(c["want_w"])) for m, c in data["gpus"].items()},
            # "energy_start_j": a record of an earlier version, written before any split
            energy_mark_j={int(m): float(e) for m, e in data.get("energy_mark_j", data.get("energy_start_j", {})).items()},
            energy_j={int(m): float(e) for m, e in data.get("energy_j", {}).items()},
            boot=str(data.get("boot", "")),
            started_at=float(data["started_at"]) if data.get("started_at") is not None else None,
            shared=bool(data.get("shared", False)),
        )


def split_energy(holders: list[JobClaims], minor: int, reading: float | None) -> None:
    """Share out what GPU ``minor`` drew since its holders last changed, equally between them.

    Called whenever a job joins or leaves a GPU, with the counter read then, so each
    interval's energy goes to exactly the jobs that held the GPU in it and the parts add
    up to the counter. Equal parts, not parts by shards: shards are Slurm's bookkeeping,
    not a limit (time-slicing gives each context the GPU in turn whatever its shard count).
    A counter that cannot be read, or went backwards, makes the GPU's energy unknown to
    every holder from then on (better none than a wrong part).
    """
    for holder in holders:
        mark = holder.energy_mark_j.pop(minor, None)
        if reading is None or mark is None or reading < mark:
            holder.energy_j.pop(minor, None)
            continue
        holder.energy_j[minor] = holder.energy_j.get(minor, 0.0) + (reading - mark) / len(holders)
        holder.energy_mark_j[minor] = reading


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except PermissionError:
        return True  # someone else's process
    except (ProcessLookupError, ValueError, OverflowError):
        return False
    return True


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
        """This job's record; None when absent or unreadable (the caller falls back on baselines)."""
        try:
            return JobClaims.from_json(self._path(job_id).read_text())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def others(self, job_id: int) -> list[JobClaims]:
        """Records of the other jobs of this boot; unreadable and earlier-boot ones are removed."""
        current, records = boot_id(), []
        for path in self.dir.glob("*.json"):
            try:
                record = JobClaims.from_json(path.read_text())
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                path.unlink(missing_ok=True)
                continue
            if record.boot != current:
                path.unlink(missing_ok=True)
            elif record.job_id != job_id:
                records.append(record)
        return sorted(records, key=lambda r: r.job_id)

    def mark_ended(self, job_id: int, given_up: bool = False) -> None:
        """Say, without the lock, that this job has left: if this Epilog dies before it is
        done, whoever takes the lock next finds the marker of a dead process and cleans up.
        ``given_up``: this process does nothing more for the job (it failed), so the marker
        names no process and the next hook cleans up even while this one is still exiting."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o755)
        self._path(job_id).with_suffix(".ended").write_text("failed" if given_up else str(os.getpid()))

    def unmark_ended(self, job_id: int) -> None:
        """The job runs (again: requeued onto this node after an Epilog that died): an earlier
        run's marker must not make the next hook release this run's claims."""
        self._path(job_id).with_suffix(".ended").unlink(missing_ok=True)

    def abandoned(self) -> set[int]:
        """Jobs marked ended whose Epilog is no longer running (killed, or crashed)."""
        jobs = set()
        for path in self.dir.glob("*.ended"):
            try:
                pid = path.read_text()
            except OSError:
                continue  # removed meanwhile
            if path.stem.isdigit() and not _alive(pid):
                jobs.add(int(path.stem))
        return jobs

    def baselines(self) -> dict[int, float]:
        """Baselines of held GPUs, this boot's only; an unreadable file counts as empty."""
        try:
            data = json.loads((self.dir / "baselines").read_text())
            if data.get("boot") != boot_id():
                return {}
            return {int(m): float(w) for m, w in data["gpus"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def save_baselines(self, baselines: dict[int, float]) -> None:
        path = self.dir / "baselines"
        tmp = path.with_name(".baselines.tmp")
        tmp.write_text(json.dumps({"boot": boot_id(), "gpus": {str(m): w for m, w in sorted(baselines.items())}}))
        os.replace(tmp, path)

    def save(self, claims: JobClaims) -> None:
        tmp = self._path(claims.job_id).with_suffix(".tmp")
        tmp.write_text(claims.to_json())
        os.replace(tmp, self._path(claims.job_id))

    def remove(self, job_id: int) -> None:
        self._path(job_id).unlink(missing_ok=True)
        self._path(job_id).with_suffix(".ended").unlink(missing_ok=True)
