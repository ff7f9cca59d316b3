"""The off switch (``slurm-green pause``) as the tick reads it, and the daemon's safe tick.

The controller is assembled from a config as ``run`` does, with a carbon file whose low
hours lie ahead (so the window policy defers), over the in-memory cluster of test_tick.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

import pytest
from test_tick import KEY, NOW, MemoryBackend, deferred_job

from slurm_green.controller import daemon
from slurm_green.controller.assemble import assemble
from slurm_green.controller.config import Config
from slurm_green.controller.daemon import operated, pause, pause_path, paused_since, released, safe_tick
from slurm_green.controller.metrics import ControllerMetrics
from slurm_green.core import decision_token
from slurm_green.core.actions import Action, ActionResult
from slurm_green.core.clock import ManualClock
from slurm_green.core.cluster import ClusterSnapshot
from slurm_green.policy.managed import NO_CAP

LOW_AT = (NOW // 3600 + 3) * 3600


@pytest.fixture
def config(tmp_path) -> Config:
    (tmp_path / "decision.key").write_bytes(KEY)
    (tmp_path / "decision.key").chmod(0o600)  # a key every user could read is refused
    lines = ["timestamp,value"]
    for h in range(-2, 24):
        t = NOW // 3600 * 3600 + h * 3600
        stamp = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        lines.append(f"{stamp},{60 if LOW_AT <= t < LOW_AT + 3 * 3600 else 450}")
    (tmp_path / "carbon.csv").write_text("\n".join(lines) + "\n")
    return Config.model_validate({
        "controller": {"state_db": str(tmp_path / "state.db"), "decision_key_file": str(tmp_path / "decision.key")},
        "carbon": {"sources": [f"csv:{tmp_path / 'carbon.csv'}"], "cache_dir": str(tmp_path / "cache")},
    })


def controller(config: Config, backend: MemoryBackend):
    parts = assemble(config, clock=ManualClock(NOW))
    parts.feed.refresh()
    parts.controller.backend = backend
    operated(parts.controller, config.controller.state_db)
    return parts


def test_the_switch_file(tmp_path):
    path = pause_path(tmp_path / "state.db")
    assert path == tmp_path / "state.paused" and paused_since(path) is None
    pause(path, "root", "grid emergency drill", NOW)
    assert paused_since(path) == {"since": NOW, "by": "root", "reason": "grid emergency drill"}
    path.write_text("not json")
    assert "treated as paused" in paused_since(path)["reason"]  # a damaged switch still means off


def test_paused_releases_every_deferred_job_uncapped_and_resume_defers_again(config):
    backend = MemoryBackend([deferred_job(1), deferred_job(2)])
    parts = controller(config, backend)
    metrics = ControllerMetrics()
    safe_tick(parts.controller, parts.clock, metrics)
    assert {j.eligible_time for j in backend.jobs.values()} == {LOW_AT}  # deferred to the low hour, capped
    assert metrics.registry.get_sample_value("slurm_green_paused") == 0

    switch = pause_path(config.controller.state_db)
    pause(switch, "root", "drill", NOW)
    backend.applied.clear()
    report = safe_tick(parts.controller, parts.clock, metrics)
    assert {j.eligible_time for j in backend.jobs.values()} == {NOW}  # released at once
    assert sorted(type(a).__name__ for a in backend.applied) == ["SetDecision"] * 2 + ["SetStartTime"] * 2
    for job in backend.jobs.values():  # the earlier 70% token is overwritten: the Prolog caps nothing
        assert decision_token.verify(KEY, job.job_id, decision_token.find_token(job.comment)) == {"cap": NO_CAP}
    assert any(note.startswith("paused: by root: drill") for note in report.notes)
    assert metrics.registry.get_sample_value("slurm_green_paused") == 1
    assert parts.controller.store.latest_decisions()[1]["reason"].startswith("slurm-green paused (by root: drill)")

    switch.unlink()
    backend.applied.clear()
    safe_tick(parts.controller, parts.clock, metrics)
    assert {j.eligible_time for j in backend.jobs.values()} == {LOW_AT}
    assert metrics.registry.get_sample_value("slurm_green_paused") == 0


def test_paused_a_job_pinned_by_an_earlier_tick_is_unpinned():
    """Its node may have died since the pin: paused, the job must be free to start anywhere."""
    pinned = replace(deferred_job(1), nodes=("gpu1",))
    [decision] = released(ClusterSnapshot(taken_at=NOW, jobs=(pinned, deferred_job(2))), NOW, "drill").decisions[:1]
    assert decision.nodes == () and decision.power_cap_fraction is None  # no token: nothing to lift
    assert released(ClusterSnapshot(taken_at=NOW, jobs=(deferred_job(2),)), NOW, "drill").decisions[0].nodes is None


def test_a_sub_second_interval_ticks_and_sigterm_stops_it(monkeypatch):
    """The scheduler's grace for a late tick is whole seconds, at least one: a 0.5 s interval
    (a test site's) runs rather than failing at start."""
    ticks = []
    monkeypatch.setattr(daemon, "safe_tick", lambda *args: ticks.append(time.monotonic()))
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    timer = threading.Timer(1.6, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        daemon.run_forever(None, ManualClock(NOW), 0.5, ControllerMetrics())
    finally:
        timer.cancel()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert len(ticks) >= 3  # at start, then every half second until SIGTERM


class StopArrivesWhileEnacting(MemoryBackend):
    """systemd's stop (and an impatient second one) while the first tick enacts."""

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        results = super().apply(actions)
        if not getattr(self, "sent", False):
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
        return results


def test_sigterm_during_the_first_tick_lets_that_tick_finish(config):
    """The first tick runs in the main thread before the scheduler starts, where the signal
    handler runs too: a stop there used to raise (APScheduler's SchedulerNotRunningError)
    in the middle of the tick, leaving its outcomes unknown and no tick row. It now
    finishes the tick, records it, and returns without starting the scheduler."""
    parts = controller(config, StopArrivesWhileEnacting([deferred_job(1), deferred_job(2)]))
    metrics = ControllerMetrics()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        daemon.run_forever(parts.controller, parts.clock, 300.0, metrics)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    store = parts.controller.store
    assert metrics.registry.get_sample_value("slurm_green_tick_errors_total") == 0
    assert store.actions() and [a for a in store.actions() if a["error"] == "unknown"] == []
    assert len(store.ticks()) == 1


def test_signals_during_a_scheduled_tick_let_it_finish(monkeypatch):
    """Two signals while a scheduled tick runs: nothing raises, and run_forever returns only
    once that tick is done (and any the scheduler started before the main thread, polling
    once a second, saw the signal another thread may have taken)."""
    events = []

    def tick(*_args):
        events.append("start")
        if len(events) > 1:  # the first scheduled tick, after the one at start
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.3)
        events.append("end")

    monkeypatch.setattr(daemon, "safe_tick", tick)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        daemon.run_forever(None, ManualClock(NOW), 0.5, ControllerMetrics())
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert len(events) >= 4 and events == ["start", "end"] * (len(events) // 2)


def test_a_failing_tick_is_counted_and_timed(config):
    class Down(MemoryBackend):
        def snapshot(self):
            raise OSError("slurmctld down")

    parts = controller(config, Down([]))
    metrics = ControllerMetrics()
    assert safe_tick(parts.controller, parts.clock, metrics) is None
    assert metrics.registry.get_sample_value("slurm_green_tick_errors_total") == 1
    assert metrics.registry.get_sample_value("slurm_green_tick_duration_seconds_count") == 1
