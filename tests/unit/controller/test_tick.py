"""Controller.tick as the daemon assembles it: config -> parts -> tick.

The cluster here is an in-memory backend (the live Slurm runs the same ticks in
tests/integration/controller); carbon comes through the real feed and HTTP client from
a local HTTP server.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import pytest

from slurm_green.controller.assemble import assemble
from slurm_green.controller.config import Config
from slurm_green.controller.metrics import ControllerMetrics
from slurm_green.controller.report import job_rows
from slurm_green.controller.daemon import safe_tick
from slurm_green.core import decision_token
from slurm_green.core.actions import Action, ActionError, ActionResult, SetDecision, SetGpus, SetStartTime
from slurm_green.core.clock import ManualClock
from slurm_green.core.cluster import ClusterSnapshot, Job
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.policy.running import GrowRunning, ShrinkRunning, ShrinkWhenDear
from slurm_green.slurm.cli_backend import CliBackend
from slurm_green.slurm.runner import LocalRunner

NOW = 1_700_000_000.0
KEY = b"k" * 32


class MemoryBackend:
    """A cluster of pending jobs that takes StartTime and decision changes."""

    def __init__(self, jobs: Sequence[Job], taken_at: float = NOW) -> None:
        self.jobs = {job.job_id: job for job in jobs}
        self.taken_at = taken_at
        self.applied: list[Action] = []

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(taken_at=self.taken_at, jobs=tuple(self.jobs.values()))

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        for action in actions:
            job = self.jobs[action.job_id]
            if isinstance(action, SetStartTime):
                job = dataclasses.replace(job, eligible_time=action.start)
            elif isinstance(action, SetDecision):
                job = dataclasses.replace(job, comment=action.token)
            self.jobs[action.job_id] = job
            self.applied.append(action)
        return [ActionResult(action) for action in actions]


def deferred_job(job_id: int, now: float = NOW) -> Job:
    """A managed job whose fallback start (its deadline) is 6 h after ``now``, as job_submit.lua leaves it."""
    options = GreenOptions(max_delay_s=6 * 3600, deadline=now + 6 * 3600)
    return Job(job_id, name="resnet50", submit_time=now - 60, eligible_time=now + 6 * 3600, time_limit_s=3600,
               gpus_per_node=1, admin_comment="sg:" + format_marker(options))


@pytest.fixture
def config(tmp_path, httpserver) -> Config:
    """Two live sources, both answering garbage; the decision key in a file."""
    (tmp_path / "decision.key").write_bytes(KEY)
    (tmp_path / "decision.key").chmod(0o600)  # a key every user could read is refused
    httpserver.expect_request("/intensity").respond_with_data("<html>maintenance</html>", status=200)
    base = httpserver.url_for("")
    return Config.model_validate({
        "controller": {"state_db": str(tmp_path / "state.db"), "decision_key_file": str(tmp_path / "decision.key")},
        "carbon": {"sources": [f"ukgrid?base_url={base}", f"ukgrid:13?base_url={base}"],
                   "cache_dir": str(tmp_path / "cache")},
    })


def test_assembly_follows_the_config(config: Config) -> None:
    assert config.slurm.backend == "cli"  # the tested backend by default; pyslurm only when asked for
    config = config.model_copy(update={"slurm": config.slurm.model_copy(update={"command_timeout_s": 7.5,
                                                                                "write_prefix": ["sudo", "-n"],
                                                                                "read_jobs": "json"})})
    parts = assemble(config, clock=ManualClock(NOW))
    backend = parts.controller.backend
    assert isinstance(backend, CliBackend) and isinstance(backend.runner, LocalRunner)
    assert backend.timeout_s == 7.5 and not backend.reads_jobs_as_text and backend.write_prefix == ("sudo", "-n")
    assert parts.controller.policy.name == "window" and parts.controller.retention_s == 90 * 86400
    assert parts.controller.sign is not None and parts.clock.now() == NOW


def test_elastic_requeue_wraps_the_policy_and_gives_the_controller_a_resizer(config: Config, tmp_path) -> None:
    assert assemble(config, clock=ManualClock(NOW)).controller.resizer is None      # off by default
    elastic = Config.model_validate({**config.model_dump(), "elastic": {
        "requeue": True, "progress_dir": str(tmp_path / "progress"), "min_interval_h": 2}})
    controller = assemble(elastic, clock=ManualClock(NOW)).controller
    assert isinstance(controller.policy, GrowRunning) and controller.policy.name == "window"
    assert controller.resizer is not None and controller.resizer.store is controller.store
    assert controller.resizer.settings.min_interval_s == 7200
    assert assemble(elastic, clock=ManualClock(NOW), with_store=False).controller.resizer is None  # `plan`
    with pytest.raises(ValueError, match="own state store"):
        dataclasses.replace(controller, store=None)
    shrinking = Config.model_validate({**elastic.model_dump(), "elastic": {**elastic.elastic.model_dump(),
                                                                         "shrink": True, "restart_cost_s": 120}})
    policy = assemble(shrinking, clock=ManualClock(NOW)).controller.policy
    assert isinstance(policy, ShrinkRunning) and isinstance(policy.inner, GrowRunning) and policy.name == "window"
    assert policy.restart_cost_s == policy.inner.restart_cost_s == 120
    icefrog = Config.model_validate({**shrinking.model_dump(), "policy": {"name": "icefrog"},
                                     "elastic": {**shrinking.elastic.model_dump(), "shrink": False}})
    policy = assemble(icefrog, clock=ManualClock(NOW)).controller.policy  # shrinks without [elastic] shrink
    assert isinstance(policy, ShrinkRunning) and isinstance(policy.inner, GrowRunning) and policy.name == "icefrog"
    assert policy.restart_cost_s == policy.inner.restart_cost_s == 120 and policy.inner.inner.name == "greenflow"
    dear = Config.model_validate({**shrinking.model_dump(), "policy": {"name": "greenflow"},
                                  "elastic": {**shrinking.elastic.model_dump(), "shrink_when_dear": True}})
    policy = assemble(dear, clock=ManualClock(NOW)).controller.policy
    assert isinstance(policy, ShrinkWhenDear) and isinstance(policy.inner, ShrinkRunning)
    assert policy.restart_cost_s == 120 and policy.name == "greenflow"


def test_with_every_carbon_source_failing_deferred_jobs_are_released_and_the_tick_says_why(config: Config) -> None:
    parts = assemble(config, clock=ManualClock(NOW))
    with pytest.raises(Exception):
        parts.feed.refresh()
    parts.controller.backend = MemoryBackend([deferred_job(1)])
    metrics = ControllerMetrics()
    report = safe_tick(parts.controller, parts.clock, metrics)
    assert report is not None
    starts = [a for a in report.actions if isinstance(a, SetStartTime)]
    assert starts == [SetStartTime(1, NOW)]
    assert any("carbon data unavailable" in note and "released" in note for note in report.notes)
    assert metrics.registry.get_sample_value("slurm_green_carbon_available") == 0
    [tick] = parts.controller.store.ticks()
    assert "carbon data unavailable" in tick["notes"] and tick["carbon_source"] is None


def ukgrid_forecast(httpserver, values: Sequence[float]) -> None:
    """The national ESO forecast from the half hour holding NOW, one value per half hour."""
    def stamp(t: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(t))

    first = NOW // 1800 * 1800
    points = [{"from": stamp(first + 1800 * i), "intensity": {"forecast": value, "actual": None, "index": "moderate"}}
              for i, value in enumerate(values)]
    httpserver.expect_request(f"/intensity/{stamp(first)}/fw48h").respond_with_json({"data": points})


def test_a_forecast_short_of_the_horizon_is_noted_with_the_value_held_beyond_it(config: Config, httpserver) -> None:
    ukgrid_forecast(httpserver, [200.0] * 11 + [123.0])  # 6 h from 22:00, 13 min 20 s before NOW
    parts = assemble(config, clock=ManualClock(NOW))
    parts.feed.refresh()
    parts.controller.backend = MemoryBackend([deferred_job(1)])
    report = parts.controller.tick(NOW)
    assert report.carbon_source == "ukgrid"
    held = [note for note in report.notes if note.startswith("carbon forecast")]
    assert held == ["carbon forecast covers 5.8 h of the 48 h horizon: the last value (123 g/kWh) is held beyond it"]
    [tick] = parts.controller.store.ticks()
    assert held[0] in tick["notes"]


def test_a_forecast_covering_the_horizon_gets_no_note(config: Config, httpserver) -> None:
    ukgrid_forecast(httpserver, [200.0] * 97)  # 48.5 h from 22:00: past NOW + 48 h
    parts = assemble(config, clock=ManualClock(NOW))
    parts.feed.refresh()
    parts.controller.backend = MemoryBackend([deferred_job(1)])
    for now in (NOW, NOW + 1800):  # a tick before the next refresh: minutes short, no note
        report = parts.controller.tick(now)
        assert report.carbon_source == "ukgrid"
        assert not [note for note in report.notes if note.startswith("carbon forecast")]


class KilledAfterEnacting(MemoryBackend):
    """Enacts the first call's actions (the decisions; starts come in a second call), then
    the process dies before the tick can record their outcome."""

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        super().apply(actions)
        raise KeyboardInterrupt


def test_a_tick_killed_while_enacting_is_neither_repeated_nor_recorded_twice(config: Config) -> None:
    jobs = [deferred_job(1), deferred_job(2)]
    first = assemble(config, clock=ManualClock(NOW))
    first.controller.carbon = None  # carbon-agnostic: release now, with a signed cap decision
    first.controller.backend = dying = KilledAfterEnacting(jobs)
    with pytest.raises(KeyboardInterrupt):
        first.controller.tick(NOW)
    assert [type(a) for a in dying.applied] == [SetDecision, SetDecision]  # killed before the starts
    audit = first.controller.store.actions()
    assert [(a["job_id"], a["kind"], a["error"]) for a in audit] == [
        (1, "SetDecision", "unknown"), (1, "SetStartTime", "unknown"),
        (2, "SetDecision", "unknown"), (2, "SetStartTime", "unknown")]  # intents, in the trail before enacting
    first.controller.store.close()

    restarted = assemble(config, clock=ManualClock(NOW + 5))
    restarted.controller.carbon = None
    restarted.controller.backend = survivor = MemoryBackend(dying.jobs.values())
    report = restarted.controller.tick(NOW + 5)
    assert survivor.applied == [SetStartTime(1, NOW + 5), SetStartTime(2, NOW + 5)]  # decisions not repeated
    assert all(r.ok for r in report.results)
    store = restarted.controller.store
    assert sorted(d["job_id"] for d in store.decisions()) == [1, 2]  # each decision once, stored before enacting
    for job in survivor.jobs.values():
        assert decision_token.verify(KEY, job.job_id, decision_token.find_token(job.comment)) == {"cap": 0.7}


def test_a_restarted_controller_puts_back_a_job_slurm_holds_for_a_limit_at_a_size_given_before(config: Config) -> None:
    """The size a job had when first seen pending is kept in the store: a job grown (here: by
    hand, as an earlier run's decision would have) and then held by Slurm for a QOS limit goes
    back to it at the first tick of a controller started afresh."""
    first = assemble(config, clock=ManualClock(NOW))
    first.controller.carbon = None
    first.controller.backend = MemoryBackend([deferred_job(1), deferred_job(2)])
    first.controller.tick(NOW)
    first.controller.store.close()

    grown = {job_id: dataclasses.replace(deferred_job(job_id), gpus_per_node=4, state_reason=reason)
             for job_id, reason in ((1, "QOSMaxGRESPerUser"), (2, "Resources"))}
    restarted = assemble(config, clock=ManualClock(NOW + 60))
    restarted.controller.carbon = None
    restarted.controller.backend = cluster = MemoryBackend(grown.values(), taken_at=NOW + 60)
    report = restarted.controller.tick(NOW + 60)
    assert SetGpus(1, 1, None) in cluster.applied and not [a for a in cluster.applied
                                                             if isinstance(a, SetGpus) and a.job_id == 2]
    [held] = [d for d in report.plan.decisions if d.job_id == 1]
    assert held.gpus_per_node == 1 and "site limit (QOSMaxGRESPerUser) at 4 GPU(s)" in held.reason


class RefusingComments(MemoryBackend):
    """Slurm refusing a Comment update (a user comment near the 1,024-character limit)."""

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        refused = [a for a in actions if isinstance(a, SetDecision)]
        results = super().apply([a for a in actions if not isinstance(a, SetDecision)])
        return [ActionResult(a, ActionError.INVALID, "Comment too long") for a in refused] + results


def test_a_job_whose_decision_is_refused_is_not_started_and_the_report_shows_no_cap(config: Config) -> None:
    parts = assemble(config, clock=ManualClock(NOW))
    parts.controller.carbon = None
    parts.controller.backend = backend = RefusingComments([deferred_job(1)])
    report = parts.controller.tick(NOW)
    assert backend.applied == [] and backend.jobs[1].eligible_time == NOW + 6 * 3600  # waits for its deadline
    assert [r.error for r in report.results] == [ActionError.INVALID, ActionError.BLOCKED]
    (row,) = job_rows(parts.controller.store)
    assert row["decided_cap_fraction"] == 0.7 and row["cap_fraction"] is None


def test_the_report_shows_the_cap_slurm_accepted(config: Config) -> None:
    parts = assemble(config, clock=ManualClock(NOW))
    parts.controller.carbon = None
    parts.controller.backend = MemoryBackend([deferred_job(1)])
    parts.controller.tick(NOW)
    (row,) = job_rows(parts.controller.store)
    assert row["cap_fraction"] == row["decided_cap_fraction"] == 0.7


def test_every_stored_decision_names_the_model_parameters_it_was_made_with(config: Config) -> None:
    parts = assemble(config, clock=ManualClock(NOW))
    parts.controller.carbon = None
    parts.controller.backend = MemoryBackend([deferred_job(1)])
    parts.controller.tick(NOW)
    [decision] = parts.controller.store.decisions()
    assert decision["model_params"] == parts.controller.models.params_id and len(decision["model_params"]) == 12


def test_every_stored_decision_says_whether_its_jobs_model_was_fitted_or_assumed(config: Config) -> None:
    """One stamp for every policy: a job whose name matches no modelled type is said to run on
    the default model, naming it; a recognised one is fitted ("")."""
    parts = assemble(config, clock=ManualClock(NOW))
    parts.controller.carbon = None
    mystery = dataclasses.replace(deferred_job(2), name="my-experiment\nFORGED")
    parts.controller.backend = MemoryBackend([deferred_job(1), mystery])
    parts.controller.tick(NOW)
    fitted, assumed = parts.controller.store.decisions()
    assert (fitted["job_id"], fitted["model_assumed"]) == (1, "")
    assert assumed["model_assumed"] == parts.controller.models.assumed("my-experiment\nFORGED")
    assert assumed["model_assumed"].startswith("job name 'my-experiment\nFORGED' matches no modelled job type: "
                                               "the conservative default model")
    assert assumed["model_params"] == fitted["model_params"] == parts.controller.models.params_id


def test_a_capped_decision_states_the_energy_of_the_job_as_asked(config: Config) -> None:
    parts = assemble(config, clock=ManualClock(NOW))
    parts.controller.carbon = None
    parts.controller.backend = MemoryBackend([deferred_job(1)])
    [decision] = parts.controller.tick(NOW).plan.decisions
    assert decision.power_cap_fraction == 0.7
    assert decision.energy_as_asked_kwh > decision.expected_energy_kwh > 0  # the cap's saving, per the models
