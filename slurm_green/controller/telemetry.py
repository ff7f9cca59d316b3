"""The controller's end of the Epilogs' energy records (see ``slurm_green.core.telemetry``):
``EnergyInbox`` reads them, ``MeteredEnergy`` turns them into the tick's observations.

A job's GPU energy is complete once every node of the job has left its record; the
inbox then sums them into one ``MeteredRun`` and removes the files. Records of jobs the
controller never decided are removed; a malformed file, or a job whose other nodes never
report within ``stale_after_s`` (a node died mid-Epilog), is removed with a warning, so
the directory cannot grow without bound; a file the controller may not read is left for
the site to fix (a warning each tick).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slurm_green.controller.store import Row, StateStore
from slurm_green.core import telemetry
from slurm_green.core.cluster import ClusterSnapshot
from slurm_green.core.telemetry import NodeEnergy
from slurm_green.core.models import Config, Observation

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
    #: The board's (min, max, default) power limits in W as NVML reported them; None from an older Epilog.
    board: tuple[float, float, float] | None = None

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
                                       any(r.shared for r in records), _board(records)))
            for path, _ in entries:
                path.unlink(missing_ok=True)
        return runs

    def _stale(self, now: float, entries: list[tuple[Path, NodeEnergy]]) -> bool:
        try:
            newest = max(path.stat().st_mtime for path, _ in entries)
        except OSError:
            return True
        return now - newest > self.stale_after_s


class MeteredEnergy:
    """The Slurm cluster's telemetry source: the Epilogs' energy records of jobs the
    controller decided, stored with each job, and as power observations for the models.

    ``learn=False`` (a site enacting caps as ``--gpu-freq`` levels) only stores them: the
    decided cap was then not the power limit the job ran under, so the energy says nothing
    about the model's power at that cap.
    """

    def __init__(self, inbox: EnergyInbox, store: StateStore, learn: bool = True) -> None:
        self.inbox = inbox
        self.store = store
        self.learn = learn

    def observations(self, now: float, snapshot: ClusterSnapshot) -> list[Observation]:
        latest = self.store.latest_decisions()
        runs = self.inbox.collect(now, lambda job_id: _node_count(latest.get(job_id), snapshot, job_id))
        found = []
        for run in runs:
            name = self.store.record_metered(run.job_id, run.energy_j / 3.6e6)
            observation = _observation(run, latest[run.job_id], name, _gpu_type(snapshot, run.job_id)) \
                if self.learn else None
            if observation is not None:
                found.append(observation)
        return found


def _board(records: list[NodeEnergy]) -> tuple[float, float, float] | None:
    """The first record's board limits (a job's nodes are of one type in practice)."""
    for r in records:
        if r.board_min_w is not None and r.board_max_w is not None and r.board_default_w is not None:
            return (r.board_min_w, r.board_max_w, r.board_default_w)
    return None


def _gpu_type(snapshot: ClusterSnapshot, job_id: int) -> str | None:
    """The GPU type the job ran on: its gres type, else its first node's; None if unknown."""
    job = snapshot.job(job_id)
    if job is None:
        return None
    if job.gpu_type:
        return job.gpu_type
    node = next((n for n in snapshot.nodes if job.nodes and n.name == job.nodes[0]), None)
    return node.gpu_type if node is not None else None


def _observation(run: MeteredRun, decision: Row, name: str | None,
                 gpu: str | None = None) -> Observation | None:
    """Mean GPU power in the configuration the job ran in, and the board it ran on; None if
    it says nothing about one."""
    power = run.mean_power_w
    if run.shared or power is None:
        return None  # a shared GPU's energy is not this job's alone
    per_node = decision["gpus_per_node"]
    if per_node and int(per_node) * run.nodes != run.gpus:
        log.info("job %s ran on %d GPUs, not as decided: not a sample of that configuration", run.job_id, run.gpus)
        return None
    cap = decision["cap_fraction"]
    config = Config(gpus=run.gpus, nodes=run.nodes, cap_fraction=float(cap) if cap else 1.0)
    return Observation(name, config, power_w=power, gpu=gpu, board=run.board)


def _node_count(decision: Row | None, snapshot: ClusterSnapshot, job_id: int) -> int | None:
    """How many nodes' records make a job's run complete: as decided, else as Slurm shows it,
    else 0 (unknown: take what is there); None for a job the controller never decided."""
    if decision is None:
        return None
    if decision["num_nodes"]:
        return int(decision["num_nodes"])
    job = snapshot.job(job_id)
    return job.num_nodes if job is not None else 0
