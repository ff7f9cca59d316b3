"""The controller's memory: every decision with its reason, every action with its outcome.

SQLite, because an admin can query it with the ``sqlite3`` shell and it survives a
killed controller: each tick's writes are one transaction, and a decision is stored
once however often the same decision is re-derived.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from slurm_green.controller.planner import START_TOLERANCE_S
from slurm_green.core.actions import Action, ActionResult
from slurm_green.core.cluster import Job, JobState
from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.plan import JobDecision
from slurm_green.core.progress import JobProgress, MeasuredRate
from slurm_green.core.text import displayable

#: One stored row, column name -> value as SQLite gives it back (int, float, str or None, by
#: column): the readers (report, accounting, metrics) convert the columns they use.
Row = dict[str, Any]

#: ``actions.error`` of an action stored before it was enacted and not (yet) given an outcome.
OUTCOME_UNKNOWN = "unknown"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL,
    decided_at REAL NOT NULL,
    start_at REAL,
    gpus_per_node INTEGER,
    num_nodes INTEGER,
    nodes TEXT,
    cap_fraction REAL,
    share_with INTEGER,
    reason TEXT NOT NULL,
    expected_energy_kwh REAL,
    expected_carbon_kg REAL,
    carbon_if_now_kg REAL,
    expected_runtime_s REAL
);
CREATE TABLE IF NOT EXISTS actions (
    id INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL,
    tick_at REAL NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    ok INTEGER NOT NULL,
    error TEXT,
    message TEXT
);
CREATE TABLE IF NOT EXISTS ticks (
    tick_at REAL PRIMARY KEY,
    policy TEXT NOT NULL,
    carbon_source TEXT,
    notes TEXT NOT NULL,
    pending INTEGER NOT NULL,
    decisions INTEGER NOT NULL,
    actions INTEGER NOT NULL,
    failures INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    job_id INTEGER PRIMARY KEY,
    user TEXT,
    name TEXT,
    submit_time REAL,
    start_time REAL,
    end_time REAL,
    state TEXT,
    last_seen REAL NOT NULL,
    energy_kwh REAL,
    carbon_kg REAL,
    accounted_until REAL,
    metered_energy_kwh REAL
);
CREATE INDEX IF NOT EXISTS decisions_job ON decisions (job_id, decided_at);
CREATE TABLE IF NOT EXISTS resizes (
    job_id INTEGER PRIMARY KEY,
    phase TEXT NOT NULL,
    gpus_per_node INTEGER,
    num_nodes INTEGER,
    signalled_at REAL,
    updated_at REAL NOT NULL,
    attempts INTEGER NOT NULL,
    note TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS rates (
    job_id INTEGER NOT NULL,
    gpus INTEGER NOT NULL,
    unit TEXT NOT NULL,
    frozen REAL NOT NULL,
    per_s_sum REAL NOT NULL,
    readings INTEGER NOT NULL,
    last_time REAL NOT NULL,
    PRIMARY KEY (job_id, gpus)
);
CREATE TABLE IF NOT EXISTS metered (
    job_id INTEGER NOT NULL,
    record TEXT NOT NULL,
    energy_kwh REAL NOT NULL,
    PRIMARY KEY (job_id, record)
);
CREATE TABLE IF NOT EXISTS usage (
    bucket INTEGER NOT NULL,
    job_id INTEGER NOT NULL,
    energy_kwh REAL NOT NULL,
    carbon_kg REAL,
    PRIMARY KEY (bucket, job_id)
);
"""
#: Usage is kept in buckets of this many seconds, so any period a site budgets (a day or a
#: week from midnight in any time zone, :30 and :45 offsets too) is a whole number of them.
USAGE_BUCKET_S = 900
#: ``prune`` keeps usage this much longer than the jobs it forgets: the longest period a
#: ``[budget]`` may have (a week, 169 h across a DST change) and a day to spare. The current
#: period started less than this before ``now``, so whatever ``retention_days`` is, the budget
#: still counts what jobs that ended earlier in the period drew.
USAGE_KEPT_BEYOND_RETENTION_S = 8 * 86400
#: Two reports' frozen shares this close are the same state of the job (``record_rates``).
_SAME_FROZEN = 0.005
#: Job ids per ``IN (...)`` query: under SQLite's oldest bound-parameter limit (999).
_IDS_PER_QUERY = 900
#: Columns added after the first release: (table, column, type), added to older files at open.
_ADDED_COLUMNS = (
    ("decisions", "expected_runtime_s", "REAL"),
    ("jobs", "energy_kwh", "REAL"),
    ("jobs", "carbon_kg", "REAL"),
    ("jobs", "accounted_until", "REAL"),
    ("jobs", "metered_energy_kwh", "REAL"),
    ("decisions", "model_params", "TEXT"),
    ("decisions", "energy_as_asked_kwh", "REAL"),
    ("decisions", "gpu_type", "TEXT"),
    ("decisions", "model_assumed", "TEXT"),
    ("jobs", "asked_nodes", "INTEGER"),
    ("jobs", "asked_gpus_per_node", "INTEGER"),
)


def same_choice(decision: JobDecision, row: Row) -> bool:
    """Whether ``decision`` re-states the stored one: the same choice re-made each tick is
    one decision; a start moved by less than the planner's tolerance is not news."""
    start = row["start_at"]
    if (decision.start_at is None) != (start is None):
        return False
    if decision.start_at is not None and abs(decision.start_at - float(start)) >= START_TOLERANCE_S:
        return False
    return (decision.gpus_per_node, decision.num_nodes, _nodes_text(decision), decision.power_cap_fraction,
            decision.share_with, decision.gpu_type) == (row["gpus_per_node"], row["num_nodes"], row["nodes"],
                                                        row["cap_fraction"], row["share_with"], row["gpu_type"])


def _nodes_text(decision: JobDecision) -> str | None:
    return None if decision.nodes is None else ",".join(decision.nodes)


class StoreMissing(FileNotFoundError):
    """A read-only open found no store: the controller has not run with this ``state_db``."""


class StateStore:
    """``read_only``: for commands that only look (``report``, ``status``): they create no
    file and no directory, so an admin running them as root leaves nothing the service
    user cannot write; a missing store is ``StoreMissing``."""

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = str(path)
        if read_only:
            if not Path(self.path).is_file():
                raise StoreMissing(f"no state store at {self.path}: the controller has not run with this state_db yet")
            self._db = sqlite3.connect(f"{Path(self.path).resolve().as_uri()}?mode=ro", uri=True,
                                       isolation_level=None, check_same_thread=False)
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        for table, column, kind in _ADDED_COLUMNS:
            present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in present:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def close(self) -> None:
        self._db.close()

    def record_decisions(self, decided_at: float, decisions: Iterable[JobDecision]) -> int:
        """Store the decisions that are news, in one transaction; returns how many.

        The tick calls this *before* it enacts anything: a controller killed while
        enacting has already written what it meant to do, and the next tick, which
        re-derives the same choice, finds it stored and does not write it again.
        """
        new = 0
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            decisions = list(decisions)
            latest = self.latest_decisions(d.job_id for d in decisions)
            for decision in decisions:
                previous = latest.get(decision.job_id)
                if previous is not None and same_choice(decision, previous):
                    continue
                self._db.execute(
                    "INSERT INTO decisions (job_id, decided_at, start_at, gpus_per_node, num_nodes, nodes,"
                    " cap_fraction, share_with, reason, expected_energy_kwh, expected_carbon_kg,"
                    " carbon_if_now_kg, expected_runtime_s, model_params, energy_as_asked_kwh, gpu_type,"
                    " model_assumed) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (decision.job_id, decided_at, decision.start_at, decision.gpus_per_node, decision.num_nodes,
                     _nodes_text(decision),
                     decision.power_cap_fraction, decision.share_with, decision.reason,
                     decision.expected_energy_kwh, decision.expected_carbon_kg, decision.carbon_if_now_kg,
                     decision.expected_runtime_s, decision.model_params, decision.energy_as_asked_kwh,
                     decision.gpu_type,
                     None if decision.model_assumed is None else displayable(decision.model_assumed)),
                )
                new += 1
        return new

    def record_intents(self, tick_at: float, actions: Sequence[Action]) -> list[int]:
        """Store the actions a tick is about to enact, before it enacts them; returns their
        row ids for ``record_outcomes``. Each starts as ``error = 'unknown'``: a controller
        killed while enacting leaves that in the audit trail, not a gap (the next tick's
        diff against Slurm shows what did take)."""
        ids: list[int] = []
        with self._db:  # one transaction
            self._db.execute("BEGIN IMMEDIATE")
            for action in actions:
                cursor = self._db.execute(
                    "INSERT INTO actions (job_id, tick_at, kind, detail, ok, error, message) VALUES (?,?,?,?,?,?,?)",
                    (action.job_id, tick_at, type(action).__name__, _action_detail(action), 0, OUTCOME_UNKNOWN,
                     "intended; no outcome recorded (controller stopped while enacting?)"),
                )
                ids.append(_inserted(cursor))
        return ids

    def record_outcomes(self, ids: Sequence[int], results: Sequence[ActionResult]) -> None:
        """Replace the intents ``ids`` (from ``record_intents``) by what happened, atomically."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                "UPDATE actions SET ok = ?, error = ?, message = ? WHERE id = ?",
                [(int(r.ok), r.error.value if r.error else None, displayable(r.message), row_id)
                 for row_id, r in zip(ids, results, strict=True)],
            )

    def record_tick(
        self,
        tick_at: float,
        policy: str,
        carbon_source: str | None,
        notes: Sequence[str],
        pending: int,
        decisions: int,
        results: Sequence[ActionResult],
    ) -> None:
        """Store a tick's summary (its actions are stored by ``record_intents``/``record_outcomes``)."""
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO ticks VALUES (?,?,?,?,?,?,?,?)",
                (tick_at, policy, carbon_source, json.dumps([displayable(n) for n in notes]), pending, decisions,
                 len(results), sum(not r.ok for r in results)),
            )

    def prune(self, before: float) -> int:
        """Forget jobs that ended, or were last seen in Slurm, before ``before`` (their
        decisions and actions too) and older ticks; returns how many jobs. Without it the
        store grows with every job ever managed and ``latest_decisions``, read every tick,
        slows down with it. A pending or running job is seen every tick, so it stays.

        Usage (``spent``, what a period budget paces by) outlives the jobs: a forgotten job's
        buckets go only once older than ``before`` less ``USAGE_KEPT_BEYOND_RETENTION_S``, so a
        retention shorter than the budget period never drops spend of the current period."""
        old = "COALESCE(end_time, last_seen) < ?"
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            for table in ("decisions", "actions", "resizes", "rates", "metered"):
                self._db.execute(f"DELETE FROM {table} WHERE job_id IN (SELECT job_id FROM jobs WHERE {old})",
                                 (before,))
            gone = self._db.execute(f"DELETE FROM jobs WHERE {old}", (before,)).rowcount
            self._db.execute("DELETE FROM ticks WHERE tick_at < ?", (before,))
            self._db.execute("DELETE FROM metered WHERE job_id NOT IN (SELECT job_id FROM jobs)")
            # A job still known keeps all its usage, however old: a period budget counts a job
            # running since before ``before`` by what it drew in the period, all of it. A job
            # forgotten keeps it a budget period longer (``USAGE_KEPT_BEYOND_RETENTION_S``).
            self._db.execute("DELETE FROM usage WHERE bucket < ? AND job_id NOT IN (SELECT job_id FROM jobs)",
                             (int((before - USAGE_KEPT_BEYOND_RETENTION_S) // USAGE_BUCKET_S),))
        return gone

    def resizes(self) -> dict[int, Row]:
        """Each job's latest running-job resize (``controller/resize.py``), by job id."""
        return {row["job_id"]: row for row in self._rows("SELECT * FROM resizes")}

    def record_resize(self, job_id: int, phase: str, at: float, note: str,
                      attempt: tuple[int, int] | None = None) -> None:
        """Move job ``job_id``'s resize to ``phase``. ``attempt`` (GPUs per node, nodes) starts a
        new attempt at ``at`` (counted, its target and signal time kept); without it the
        attempt's target and count stay."""
        with self._db:
            if attempt is not None:
                self._db.execute(
                    "INSERT INTO resizes VALUES (?,?,?,?,?,?,1,?) ON CONFLICT(job_id) DO UPDATE SET"
                    " phase=excluded.phase, gpus_per_node=excluded.gpus_per_node, num_nodes=excluded.num_nodes,"
                    " signalled_at=excluded.signalled_at, updated_at=excluded.updated_at,"
                    " attempts=attempts + 1, note=excluded.note",
                    (job_id, phase, attempt[0], attempt[1], at, at, displayable(note)))
            else:
                self._db.execute(
                    "INSERT INTO resizes VALUES (?,?,NULL,NULL,NULL,?,0,?) ON CONFLICT(job_id) DO UPDATE SET"
                    " phase=excluded.phase, updated_at=excluded.updated_at, note=excluded.note",
                    (job_id, phase, at, displayable(note)))

    def record_rates(self, readings: Iterable[tuple[int, int, JobProgress]]) -> None:
        """Add each (job id, GPUs, report) reading's rate to that job's mean at that GPU count, once
        per report (by its time), in one transaction; a report in another unit or at another
        frozen share starts the mean again."""
        with self._db:
            self._db.executemany(
                "INSERT INTO rates VALUES (?,?,?,?,?,1,?) ON CONFLICT(job_id, gpus) DO UPDATE SET"
                " per_s_sum = CASE WHEN unit = excluded.unit AND ABS(frozen - excluded.frozen) <= ?"
                "   THEN per_s_sum + excluded.per_s_sum ELSE excluded.per_s_sum END,"
                " readings = CASE WHEN unit = excluded.unit AND ABS(frozen - excluded.frozen) <= ?"
                "   THEN readings + 1 ELSE 1 END,"
                " unit = excluded.unit, frozen = excluded.frozen, last_time = excluded.last_time"
                " WHERE excluded.last_time > last_time",
                [(job_id, gpus, report.unit, report.frozen, report.per_s, report.time, _SAME_FROZEN, _SAME_FROZEN)
                 for job_id, gpus, report in readings])

    def rates(self, job_ids: Iterable[int]) -> dict[int, tuple[MeasuredRate, ...]]:
        """The mean rates ``record_rates`` kept of each of ``job_ids`` that has any, by GPU count."""
        found: dict[int, list[MeasuredRate]] = {}
        for row in self._rows_of("SELECT * FROM rates WHERE job_id IN ({ids}) ORDER BY job_id, gpus", job_ids):
            found.setdefault(row["job_id"], []).append(MeasuredRate(
                row["gpus"], row["unit"], row["frozen"], row["per_s_sum"] / row["readings"], row["readings"]))
        return {job_id: tuple(rates) for job_id, rates in found.items()}

    def observe_jobs(self, seen_at: float, jobs: Iterable[Job]) -> None:
        """Keep what Slurm says of managed jobs (their actual start and end), for reports, and
        the size a job had when first seen pending, before any decision resized it (``asked_sizes``)."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                "INSERT INTO jobs (job_id, user, name, submit_time, start_time, end_time, state, last_seen,"
                " asked_nodes, asked_gpus_per_node) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(job_id) DO UPDATE SET"
                " start_time=COALESCE(excluded.start_time, start_time),"
                " end_time=COALESCE(excluded.end_time, end_time), state=excluded.state, last_seen=excluded.last_seen,"
                " asked_nodes=COALESCE(asked_nodes, excluded.asked_nodes),"
                " asked_gpus_per_node=COALESCE(asked_gpus_per_node, excluded.asked_gpus_per_node)",
                [(job.job_id, displayable(job.user), displayable(job.name), job.submit_time, job.start_time if not job.is_pending else None,
                  job.end_time if not job.state.is_active else None, job.state.value, seen_at,
                  job.num_nodes if job.is_pending else None, job.gpus_per_node if job.is_pending else None)
                 for job in jobs],
            )

    def asked_sizes(self, job_ids: Iterable[int]) -> dict[int, tuple[int, int]]:
        """(nodes, GPUs per node) each of ``job_ids`` had when the controller first saw it pending
        (none for a job it never saw so, or saw only before it kept sizes)."""
        rows = self._rows_of("SELECT job_id, asked_nodes, asked_gpus_per_node FROM jobs WHERE job_id IN ({ids})"
                             " AND asked_nodes IS NOT NULL AND asked_gpus_per_node IS NOT NULL", job_ids)
        return {int(row["job_id"]): (int(row["asked_nodes"]), int(row["asked_gpus_per_node"])) for row in rows}

    def account_usage(self, now: float, jobs: Iterable[Job], signal: CarbonForecast | None) -> None:
        """Add each started job's energy and carbon since it was last accounted, up to now or its end.

        Energy is the decided configuration's modelled power (expected energy over expected
        runtime) times the time the job actually ran; carbon multiplies it by the grid's
        intensity over that same stretch (``signal.mean_over``), so a job that ran longer,
        or in dirtier hours than planned, shows it. A stretch without a carbon signal adds
        energy but no carbon. Accounting stops when a job leaves squeue (MinJobAge after
        its end): with ticks further apart than that, the last stretch is missed.
        """
        jobs = [job for job in jobs if not job.is_pending and job.start_time is not None]
        latest = self.latest_decisions(job.job_id for job in jobs)
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            for job in jobs:
                decision = latest.get(job.job_id)
                if decision is None or job.start_time is None:
                    continue
                energy, runtime = decision["expected_energy_kwh"], decision["expected_runtime_s"]
                if not energy or not runtime:
                    continue
                row = self._db.execute("SELECT accounted_until FROM jobs WHERE job_id = ?", (job.job_id,)).fetchone()
                begin = max(job.start_time, row[0] or job.start_time) if row else job.start_time
                running = job.state in (JobState.RUNNING, JobState.SUSPENDED)  # squeue's end_time: the limit
                end = now if running or not job.end_time else min(now, job.end_time)
                if not running and job.end_time and job.end_time < begin:
                    # a tick saw the job still running just after it ended: take that stretch back
                    end = job.end_time
                elif end <= begin:
                    # nothing new; or the clock stepped back (NTP step, VM restore) below what was
                    # accounted: what was counted up to ``begin`` really ran, so it stays
                    continue
                kwh_per_s = float(energy) / float(runtime) * (1.0 if end > begin else -1.0)
                kwh = kg = 0.0
                for piece_start, piece_end in _buckets(min(begin, end), max(begin, end)):
                    piece_kwh = kwh_per_s * (piece_end - piece_start)
                    piece_kg = (piece_kwh * float(signal.mean_over(piece_start, piece_end)) / 1000.0
                                if signal is not None else None)
                    self._db.execute(
                        "INSERT INTO usage (bucket, job_id, energy_kwh, carbon_kg) VALUES (?,?,?,?)"
                        " ON CONFLICT(bucket, job_id) DO UPDATE SET energy_kwh = energy_kwh + excluded.energy_kwh,"
                        " carbon_kg = CASE WHEN excluded.carbon_kg IS NULL THEN carbon_kg"
                        " ELSE COALESCE(carbon_kg, 0) + excluded.carbon_kg END",
                        (int(piece_start // USAGE_BUCKET_S), job.job_id, piece_kwh, piece_kg))
                    kwh += piece_kwh
                    kg = kg + piece_kg if piece_kg is not None else kg
                self._db.execute(
                    "UPDATE jobs SET energy_kwh = COALESCE(energy_kwh, 0) + ?,"
                    " carbon_kg = CASE WHEN ? IS NULL THEN carbon_kg ELSE COALESCE(carbon_kg, 0) + ? END,"
                    " accounted_until = ? WHERE job_id = ?",
                    (kwh, None if signal is None else kg, kg, end, job.job_id),
                )

    def spent(self, start: float, end: float) -> Spent:
        """Energy and carbon that managed jobs' GPUs used in ``[start, end)`` (both on a bucket
        boundary, as a budget period's are), as ``account_usage`` accounted it."""
        row = self._db.execute(
            "SELECT COALESCE(SUM(energy_kwh), 0), COALESCE(SUM(carbon_kg), 0), COUNT(DISTINCT job_id) FROM usage"
            " WHERE bucket >= ? AND bucket < ?",
            (int(start // USAGE_BUCKET_S), int(math.ceil(end / USAGE_BUCKET_S)))).fetchone()
        return Spent(energy_kwh=float(row[0]), carbon_kg=float(row[1]), jobs=int(row[2]))

    def record_metered_run(self, job_id: int, records: Sequence[tuple[str | None, float]]) -> tuple[bool, str | None]:
        """Add a finished run's metered GPU energy, (record, kWh) per node, to the job's, in one
        transaction: a job that ran more than once under its id (requeued, resized) sums its
        runs. A record (its Epilog file's identity) is counted once however often it is handed
        in (a controller killed between storing it and removing the file hands it in again);
        a record of None is always new. Returns whether every record was new, and the job's
        name (its model's type)."""
        new = 0
        added = 0.0
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            for record, energy_kwh in records:
                if record is not None and not self._db.execute(
                        "INSERT OR IGNORE INTO metered (job_id, record, energy_kwh) VALUES (?,?,?)",
                        (job_id, record, energy_kwh)).rowcount:
                    continue
                new += 1
                added += energy_kwh
            if new:
                self._db.execute("UPDATE jobs SET metered_energy_kwh = COALESCE(metered_energy_kwh, 0) + ?"
                                 " WHERE job_id = ?", (added, job_id))
            row = self._db.execute("SELECT name FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return bool(records) and new == len(records), (row[0] if row else None)

    def jobs(self) -> list[Row]:
        return self._rows("SELECT * FROM jobs ORDER BY job_id")

    def job(self, job_id: int) -> Row | None:
        """What the store saw of one job (``None``: never managed, or forgotten)."""
        rows = self._rows("SELECT * FROM jobs WHERE job_id = ?", (job_id,))
        return rows[0] if rows else None

    def decisions(self, job_id: int | None = None) -> list[Row]:
        query = "SELECT * FROM decisions"
        args: tuple[object, ...] = ()
        if job_id is not None:
            query += " WHERE job_id = ?"
            args = (job_id,)
        return self._rows(query + " ORDER BY decided_at, id", args)

    def latest_decisions(self, job_ids: Iterable[int] | None = None) -> dict[int, Row]:
        """The newest decision per job (of ``job_ids`` only, if given): what the controller intends.

        A tick asks for the jobs it sees, through the index, so its cost follows the queue,
        not every decision the store keeps (a simulated Gavel trace paced by a period budget:
        283 s with the whole table read twice a tick)."""
        if job_ids is None:
            rows = self._rows(
                "SELECT d.* FROM decisions d JOIN (SELECT job_id, MAX(id) AS id FROM decisions GROUP BY job_id) m"
                " ON d.id = m.id")
        else:
            rows = self._rows_of(
                "SELECT d.* FROM decisions d JOIN (SELECT job_id, MAX(id) AS id FROM decisions WHERE job_id IN"
                " ({ids}) GROUP BY job_id) m ON d.id = m.id", job_ids)
        return {int(row["job_id"]): row for row in rows}

    def actions(self, job_id: int | None = None) -> list[Row]:
        query = "SELECT * FROM actions"
        args: tuple[object, ...] = ()
        if job_id is not None:
            query += " WHERE job_id = ?"
            args = (job_id,)
        return self._rows(query + " ORDER BY id", args)

    def ticks(self) -> list[Row]:
        return self._rows("SELECT * FROM ticks ORDER BY tick_at")

    def _rows_of(self, query: str, job_ids: Iterable[int]) -> list[Row]:
        """``query`` over ``job_ids``, its ``{ids}`` filled with their placeholders, in chunks of
        ``_IDS_PER_QUERY`` (rows in each chunk's order)."""
        ids = sorted(set(job_ids))
        rows: list[Row] = []
        for first in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[first:first + _IDS_PER_QUERY]
            rows += self._rows(query.format(ids=",".join("?" * len(chunk))), tuple(chunk))
        return rows

    def _rows(self, query: str, args: tuple[object, ...] = ()) -> list[Row]:
        cursor = self._db.execute(query, args)
        names = [c[0] for c in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]


@dataclass(frozen=True)
class Spent:
    """What managed jobs used in a stretch of time: GPU energy (kWh), its carbon (kg; stretches
    accounted without a carbon signal add none) and how many jobs ran in it."""

    energy_kwh: float
    carbon_kg: float
    jobs: int


def _buckets(start: float, end: float) -> Iterator[tuple[float, float]]:
    """``[start, end]`` cut at every ``USAGE_BUCKET_S`` boundary."""
    while start < end:
        cut = min(end, (math.floor(start / USAGE_BUCKET_S) + 1) * USAGE_BUCKET_S)
        yield start, cut
        start = cut


def _inserted(cursor: sqlite3.Cursor) -> int:
    """The id of the row ``cursor`` just inserted (sqlite3 types it optional: it is None only
    before any INSERT)."""
    if cursor.lastrowid is None:
        raise sqlite3.ProgrammingError("no row was inserted")
    return cursor.lastrowid


def _action_detail(action: Action) -> str:
    fields = asdict(action)
    fields.pop("job_id")
    return json.dumps(fields, sort_keys=True, default=str)
