"""The periodic loop, and the admin's off switch.

The loop: APScheduler 3 runs ``Controller.tick`` every interval, in its own thread (the
first tick, at start, runs in the main thread). One tick at a time (``max_instances=1``)
and no catch-up burst after a stall (``coalesce=True``): a tick always works from a
fresh snapshot, so a skipped tick loses nothing. A failing tick
is logged and counted; the loop goes on. SIGTERM or SIGINT stops the loop once the
tick in progress has finished and been recorded (:func:`run_forever`).

The off switch (``slurm-green pause``/``resume``): a file next to the state store,
``<state_db>.paused``, that the controller's policy reads at every tick
(:class:`OperatedPolicy`). While it exists, every managed pending job is released at
once and nothing is deferred or capped: the same plan the carbon-agnostic FIFO
baseline makes, with a cap of 100% written over any cap a job was already given
(a decision without a cap would leave an earlier token in the job's Comment, and the
Prolog would still enforce it). A file, not a database row, because root may pause
(the file is then root's, which the service user can still read and, owning the
directory, remove) and a file is what an admin's runbook can check with ``ls``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from apscheduler.schedulers.background import BackgroundScheduler

from slurm_green.controller.metrics import ControllerMetrics
from slurm_green.controller.tick import Controller, TickReport
from slurm_green.core.clock import Clock
from slurm_green.core.cluster import ClusterSnapshot
from slurm_green.core.decision import DecisionContext
from slurm_green.core.plan import Plan, Policy
from slurm_green.policy.managed import managed_pending, released_as_started

log = logging.getLogger(__name__)

def pause_path(state_db: Path) -> Path:
    """Where the off switch lives for the controller of ``state_db``."""
    return Path(state_db).with_suffix(".paused")


def pause(path: Path, by: str, why: str, now: float) -> None:
    """Turn the switch on (atomically: a tick reads a whole file or none)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"since": now, "by": by, "reason": why}) + "\n")
    os.replace(tmp, path)


def paused_since(path: Path) -> dict[str, object] | None:
    """The switch's record when it is on; an unreadable record still means paused (fail safe)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"since": None, "by": "?", "reason": f"switch file unreadable ({exc.strerror}): treated as paused"}
    try:
        record = json.loads(text)
        return record if isinstance(record, dict) else {"reason": "malformed switch file: treated as paused"}
    except ValueError:
        return {"since": None, "by": "?", "reason": "malformed switch file: treated as paused"}


def released(snapshot: ClusterSnapshot, now: float, why: str) -> Plan:
    """The paused plan: every managed pending job starts now, uncapped (see the module docstring)."""
    decisions = tuple(released_as_started(job, now, f"slurm-green paused ({why}): start now at full power")
                      for job, _ in managed_pending(snapshot))
    return Plan(decisions=decisions, notes=(f"paused: {why}; every managed job is released (slurm-green resume)",))


@dataclass
class OperatedPolicy:
    """The configured policy, switched off while the pause file exists.

    It also keeps the snapshot it last decided on, for the metrics' per-partition and
    per-account labels (the tick's report carries decisions, not the jobs)."""

    policy: Policy
    switch: Path
    last_snapshot: ClusterSnapshot | None = field(default=None, repr=False)
    paused: bool = False

    @property
    def name(self) -> str:
        return self.policy.name

    def __call__(self, context: DecisionContext) -> Plan:
        self.last_snapshot = context.snapshot
        record = paused_since(self.switch)
        self.paused = record is not None
        if record is None:
            return self.policy(context)
        return released(context.snapshot, context.now, f"by {record.get('by', '?')}: {record.get('reason') or 'no reason given'}")


def operated(controller: Controller, state_db: Path) -> OperatedPolicy:
    """Put the off switch in front of ``controller``'s policy (``run``, ``plan`` and ``pause`` do)."""
    if not isinstance(controller.policy, OperatedPolicy):
        controller.policy = OperatedPolicy(controller.policy, pause_path(state_db))
    return controller.policy


def safe_tick(controller: Controller, clock: Clock, metrics: ControllerMetrics) -> TickReport | None:
    """A tick that never raises: the daemon must outlive a slurmctld restart."""
    started = time.monotonic()
    try:
        report = controller.tick(clock.now())
    except Exception:
        metrics.tick_failed(time.monotonic() - started)
        log.exception("tick failed; nothing was enacted in the failing step, retrying next interval")
        return None
    metrics.observe(report, time.monotonic() - started, controller)
    return report


def run_forever(controller: Controller, clock: Clock, interval_s: float, metrics: ControllerMetrics) -> None:
    """Tick at once, then every ``interval_s`` until SIGTERM or SIGINT; a stop lets the tick in progress finish.

    The signal handler only records the request: it runs in the main thread, which at
    start is running the first tick itself, so anything more there (APScheduler's
    ``shutdown`` raises when the scheduler is not running yet) would surface in the middle
    of that tick, between enacting and recording. The main thread checks the request after
    the first tick, and otherwise waits for it while the scheduler's own thread ticks, then
    shuts the scheduler down, waiting for a tick in progress. A second signal changes nothing.
    """
    stop = threading.Event()

    def _shutdown(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping after the current tick", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _shutdown)
    signal.signal(signal.SIGINT, _shutdown)
    safe_tick(controller, clock, metrics)  # the first tick at start, not one interval later
    if stop.is_set():
        return
    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.add_job(safe_tick, "interval", args=(controller, clock, metrics), seconds=interval_s,
                      max_instances=1, coalesce=True, misfire_grace_time=max(1, math.ceil(interval_s)),
                      id="tick")
    scheduler.start()
    log.info("controller running: a tick every %.0f s", interval_s)
    try:
        # Bounded: the kernel may give the signal to another thread (the scheduler's, the
        # carbon feed's), which does not wake this wait; the handler then runs at the next second.
        while not stop.wait(1.0):
            pass
    finally:
        scheduler.shutdown(wait=True)
