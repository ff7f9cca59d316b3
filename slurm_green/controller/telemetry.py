"""The controller's end of the Epilogs' energy records (see ``slurm_green.core.telemetry``):
``EnergyInbox`` reads them, ``MeteredEnergy`` turns them into the tick's observations.

A run's GPU energy is complete once every node of the job has left its record for it; the
inbox then sums them into one ``MeteredRun``, hands it to the store and only then removes
the files. A job that runs again under its id (requeued, resized) leaves a record per node
and run (``NodeEnergy.started_at`` in the name); an older Epilog's records have no run
and share one name. Each record counts once: the store keys what it added on the record
(its name; an older Epilog's with its time and figures), so a controller killed between
storing a run and removing its files finds them again and adds nothing. Records of jobs the
controller never decided are removed; a malformed file, or a job whose other nodes never
report within ``stale_after_s`` (a node died mid-Epilog), is removed with a warning, so
the directory cannot grow without bound; a file the controller may not read is left for
the site to fix (a warning each tick).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from slurm_green.controller.store import Row, StateStore
from slurm_green.core import telemetry
from slurm_green.core.cluster import ClusterSnapshot
from slurm_green.core.telemetry import NodeEnergy
from slurm_green.core.models import Config, Observation

log = logging.getLogger(__name__)

#: Records of one run start within this of each other: the Prologs of its nodes run at
#: allocation (PrologFlags=Alloc), nodes resuming from power saving a few minutes late.
RUN_SKEW_S = 600.0


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
    #: When the run started (its earliest node's Prolog); None from an older Epilog.
    started_at: float | None = None
    #: (record, joules) per node record: what the store keys the run's energy on.
    records: tuple[tuple[str, float], ...] = field(default=(), compare=False)

    @property
    def mean_power_w(self) -> float | None:
        return self.energy_j / self.seconds if self.seconds > 0 else None


class EnergyInbox:
    def __init__(self, directory: str | Path, stale_after_s: float = 86_400.0) -> None:
        self.directory = Path(directory)
        self.stale_after_s = stale_after_s

    def collect(self, now: float, nodes_of: Callable[[int], int | None],
                record: Callable[[MeteredRun], object] | None = None) -> list[MeteredRun]:
        """Complete runs, oldest job (and run) first.

        ``nodes_of(job_id)``: the job's node count; 0 when unknown (what is there is taken
        as all of it); None for a job that is not the controller's (its records are dropped).
        ``record(run)`` is called for each complete run before its files are removed: if it
        raises, they stay for the next tick.
        """
        if not self.directory.is_dir():
            return []
        by_job: dict[int, list[tuple[Path, NodeEnergy]]] = {}
        for path in sorted(self.directory.glob("*" + telemetry.SUFFIX)):
            try:
                found = telemetry.read(path)
            except OSError as exc:  # e.g. permissions: the site can fix that, so keep the file
                log.warning("cannot read the energy record %s: %s", path, exc)
                continue
            except ValueError as exc:
                log.warning("removing a malformed energy record: %s", exc)
                path.unlink(missing_ok=True)
                continue
            by_job.setdefault(found.job_id, []).append((path, found))
        runs = []
        for job_id, all_entries in sorted(by_job.items()):
            nodes = nodes_of(job_id)
            for entries in _runs(all_entries):
                complete = nodes is not None and len({r.node for _, r in entries}) >= nodes
                if nodes is not None and not complete and not self._stale(now, entries):
                    continue  # the other nodes' Epilogs have not written yet
                if nodes is not None and not complete:
                    log.warning("job %s: energy from %d of its %d nodes after %.0f h; dropped", job_id,
                                len(entries), nodes, self.stale_after_s / 3600)
                elif complete:
                    try:
                        keys = tuple((_record_key(path, r), r.energy_j) for path, r in entries)
                    except OSError as exc:  # gone or unreadable meanwhile: the next tick sees
                        log.warning("cannot read the energy record of job %s: %s", job_id, exc)
                        continue
                    records = [r for _, r in entries]
                    starts = [r.started_at for r in records if r.started_at is not None]
                    run = MeteredRun(job_id, sum(r.energy_j for r in records), max(r.seconds for r in records),
                                     sum(r.gpus for r in records), len({r.node for r in records}),
                                     any(r.shared for r in records), _board(records),
                                     min(starts) if starts else None, keys)
                    if record is not None:
                        record(run)
                    runs.append(run)
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
        fresh: list[tuple[MeteredRun, str | None]] = []

        def store(run: MeteredRun) -> None:
            new, name = self.store.record_metered_run(run.job_id, [(key, j / 3.6e6) for key, j in run.records])
            if new:  # a run handed in again (files left by a killed tick) teaches nothing twice
                fresh.append((run, name))

        self.inbox.collect(now, lambda job_id: _node_count(latest.get(job_id), snapshot, job_id), store)
        found = []
        for run, name in fresh:
            observation = _observation(run, latest[run.job_id], name, _gpu_type(snapshot, run.job_id)) \
                if self.learn else None
            if observation is not None:
                found.append(observation)
        return found


def _runs(entries: list[tuple[Path, NodeEnergy]]) -> Iterator[list[tuple[Path, NodeEnergy]]]:
    """A job's records, run by run, oldest first: an older Epilog's (no run start: one name for
    every run, so at most one per node) together; then by start, a run holding one record per
    node, all started within ``RUN_SKEW_S`` of its first."""
    old = [entry for entry in entries if entry[1].started_at is None]
    if old:
        yield old
    run: list[tuple[Path, NodeEnergy]] = []
    for entry in sorted((e for e in entries if e[1].started_at is not None), key=lambda e: e[1].started_at or 0.0):
        first = run[0][1].started_at if run else None
        if run and (entry[1].node in {r.node for _, r in run}
                    or (entry[1].started_at or 0.0) - (first or 0.0) > RUN_SKEW_S):
            yield run
            run = []
        run.append(entry)
    if run:
        yield run


def _record_key(path: Path, record: NodeEnergy) -> str:
    """What identifies a node's record of one run in the store: its name, which holds the run's
    start; an older Epilog's name is the same for every run, so its time and figures with it."""
    if record.started_at is not None:
        return path.name
    return f"{path.name}@{path.stat().st_mtime_ns}:{record.energy_j!r}:{record.seconds!r}"


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
