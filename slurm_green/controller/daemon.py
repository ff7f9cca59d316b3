"""The periodic loop: APScheduler 3 runs ``Controller.tick`` every interval.

One tick at a time (``max_instances=1``) and no catch-up burst after a stall
(``coalesce=True``): a tick always works from a fresh snapshot, so a skipped tick
loses nothing. A failing tick is logged and counted; the loop goes on.
"""

from __future__ import annotations

import logging
import signal
import threading

from apscheduler.schedulers.blocking import BlockingScheduler

from slurm_green.controller.metrics import ControllerMetrics
from slurm_green.controller.tick import Controller, TickReport
from slurm_green.core.clock import Clock

log = logging.getLogger(__name__)


def safe_tick(controller: Controller, clock: Clock, metrics: ControllerMetrics) -> TickReport | None:
    """A tick that never raises: the daemon must outlive a slurmctld restart."""
    try:
        report = controller.tick(clock.now())
    except Exception:
        metrics.tick_errors.inc()
        log.exception("tick failed; nothing was enacted in the failing step, retrying next interval")
        return None
    metrics.observe(report)
    return report


def run_forever(controller: Controller, clock: Clock, interval_s: float, metrics: ControllerMetrics) -> None:
    scheduler = BlockingScheduler(timezone="UTC")
    scheduler.add_job(safe_tick, "interval", args=(controller, clock, metrics), seconds=interval_s,
                      max_instances=1, coalesce=True, misfire_grace_time=int(interval_s),
                      id="tick")
    stop = threading.Event()

    def _shutdown(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping after the current tick", signum)
        stop.set()
        scheduler.shutdown(wait=True)

    signal.signal(signal.SIGTERM, _shutdown)
    signal.signal(signal.SIGINT, _shutdown)
    safe_tick(controller, clock, metrics)  # the first tick at start, not one interval later
    if not stop.is_set():
        log.info("controller running: a tick every %.0f s", interval_s)
        scheduler.start()
