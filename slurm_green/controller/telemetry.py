"""The controller's end of the Epilogs' energy records (see ``slurm_green.core.telemetry``).

A job's GPU energy is complete once every node of the job has left its record; the
inbox then sums them into one ``MeteredRun`` and removes the files. Records of jobs the
controller never decided are removed unread; an unreadable file, or a job whose other
nodes never report within ``stale_after_s`` (a node died mid-Epilog), is removed with a
warning, so the directory cannot grow without bound; a file the controller may not read
is left for the site to fix (a warning each tick).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slurm_green.core import telemetry
from slurm_green.core.telemetry import NodeEnergy

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MeteredRun:
    """A finished job's GPU energy over all its nodes, and how long its GPUs were claimed."""

    job_id: int
    energy_j: float
    seconds: float
    gpus: int
    nodes: int
    shared: bool

    @property
    def mean_power_w(self) -> float | None:
        return self.energy_j / self.seconds if self.seconds > 0 else None


class EnergyInbox:
    def __init__(self, directory: str | Path, stale_after_s: float = 86_400.0) -> None:
        self.directory = Path(directory)
        self.stale_after_s = stale_after_s

    def collect(self, now: float, nodes_of: Callable[[int], int | None]) -> list[MeteredRun]:
        """Complete runs, oldest job first.

        ``nodes_of(job_id)``: the job's node count; 0 when unknown (what is there is taken
        as all of it); None for a job that is not the controller's (its records are dropped).
        """
        if not self.directory.is_dir():
            return []
        by_job: dict[int, list[tuple[Path, NodeEnergy]]] = {}
        for path in sorted(self.directory.glob("*" + telemetry.SUFFIX)):
            try:
                record = telemetry.read(path)
            except OSError as exc:  # e.g. permissions: the site can fix that, so keep the file
                log.warning("cannot read the energy record %s: %s", path, exc)
                continue
            except ValueError as exc:
                log.warning("removing a malformed energy record: %s", exc)
                path.unlink(missing_ok=True)
                continue
            by_job.setdefault(record.job_id, []).append((path, record))
        runs = []
        for job_id, entries in sorted(by_job.items()):
            nodes = nodes_of(job_id)
            complete = nodes is not None and len({record.node for _, record in entries}) >= nodes
            if nodes is not None and not complete and not self._stale(now, entries):
                continue  # the other nodes' Epilogs have not written yet
            if nodes is not None and not complete:
                log.warning("job %s: energy from %d of its %d nodes after %.0f h; dropped", job_id,
                            len(entries), nodes, self.stale_after_s / 3600)
            elif complete:
                records = [record for _, record in entries]
                runs.append(MeteredRun(job_id, sum(r.energy_j for r in records), max(r.seconds for r in records),
                                       sum(r.gpus for r in records), len({r.node for r in records}),
                                       any(r.shared for r in records)))
            for path, _ in entries:
                path.unlink(missing_ok=True)
        return runs

    def _stale(self, now: float, entries: list[tuple[Path, NodeEnergy]]) -> bool:
        try:
            newest = max(path.stat().st_mtime for path, _ in entries)
        except OSError:
            return True
        return now - newest > self.stale_after_s
