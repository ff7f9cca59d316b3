"""The Prometheus metrics of a tick, read back through prometheus_client's own exposition,
and the Grafana dashboard's queries checked against the names the controller exports."""

from __future__ import annotations

import json
import math
import re
from importlib.resources import files

import pandas as pd
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from slurm_green.carbon.feed import CarbonFeed
from slurm_green.carbon.spec import parse_sources
from slurm_green.controller.daemon import OperatedPolicy
from slurm_green.controller.metrics import ControllerMetrics
from slurm_green.controller.store import StateStore
from slurm_green.controller.tick import Controller, TickReport
from slurm_green.core import decision_token
from slurm_green.core.actions import ActionError, ActionResult, SetDecision, SetStartTime
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.policy.window import WindowPolicy

NOW = 1_700_000_000.0
KEY = b"k" * 32
DASHBOARD = files("slurm_green.templates") / "grafana" / "slurm-green.json"  # as the wheel ships it
MARKED = "sg:managed=1;flex=21600;cap=1;share=0"


def job(job_id: int, partition: str, account: str, **fields) -> Job:
    return Job(job_id, partition=partition, account=account, admin_comment=MARKED, **fields)


def observed(tmp_path) -> ControllerMetrics:
    """One tick: jobs 1 and 2 deferred (gpu/physics, gpu/bio), 3 started now; job 4 runs under a
    signed 70% cap, job 5 under a forged one; one action refused."""
    csv = tmp_path / "carbon.csv"
    csv.write_text("timestamp,value\n" + "".join(
        f"{pd.Timestamp(NOW // 3600 * 3600 + (h - 1) * 3600, unit='s', tz='UTC').isoformat()},{300 + h}\n" for h in range(30)))
    feed = CarbonFeed(parse_sources([f"csv:{csv}"], None), clock=lambda: NOW)
    feed.refresh()
    store = StateStore(tmp_path / "state.db")
    store.record_decisions(NOW, [JobDecision(1, start_at=NOW + 7200, expected_carbon_kg=0.1, carbon_if_now_kg=0.5,
                                             expected_energy_kwh=0.75, energy_as_asked_kwh=1.0)])
    snapshot = ClusterSnapshot(taken_at=NOW, jobs=(
        job(1, "gpu", "physics"), job(2, "gpu", "bio"), job(3, "gpu", "physics"),
        job(4, "gpu", "physics", state=JobState.RUNNING, comment=decision_token.sign(KEY, 4, {"cap": 0.7})),
        job(5, "a100", "bio", state=JobState.RUNNING, comment=decision_token.sign(b"x" * 32, 5, {"cap": 0.5}))))
    policy = OperatedPolicy(WindowPolicy(), tmp_path / "state.paused", last_snapshot=snapshot)
    controller = Controller(backend=None, policy=policy, carbon=feed, models=None, store=store,  # type: ignore[arg-type]
                            verify=lambda job_id, token: decision_token.verify(KEY, job_id, token))
    plan = Plan(decisions=(JobDecision(1, start_at=NOW + 7200, power_cap_fraction=0.7),
                           JobDecision(2, start_at=NOW + 3600), JobDecision(3, start_at=NOW, gpus_per_node=2)))
    results = [ActionResult(SetStartTime(1, NOW + 7200)),
               ActionResult(SetDecision(2, "t"), ActionError.PERMISSION_DENIED, "Invalid user id")]
    report = TickReport(now=NOW, plan=plan, results=results, carbon_source=f"csv:{csv}",
                        forecast=feed.snapshot(NOW).signal, pending=3)
    metrics = ControllerMetrics()
    metrics.observe(report, 0.42, controller)
    return metrics


def test_a_tick_exports_what_an_admin_graphs(tmp_path):
    m = observed(tmp_path)
    value = m.registry.get_sample_value
    assert value("slurm_green_carbon_intensity_g_per_kwh") == 301
    [source] = [s for s in m.registry.collect() if s.name == "slurm_green_carbon_source_info"][0].samples
    assert source.labels["synthetic"] == "false" and source.labels["source"].startswith("csv:")
    assert value("slurm_green_deferred_jobs", {"partition": "gpu", "account": "physics"}) == 1
    assert value("slurm_green_deferred_jobs", {"partition": "gpu", "account": "bio"}) == 1
    assert value("slurm_green_plan_decisions", {"decision": "start_now"}) == 1
    assert value("slurm_green_plan_decisions", {"decision": "capped"}) == 1
    assert value("slurm_green_plan_decisions", {"decision": "resized"}) == 1
    assert value("slurm_green_capped_jobs", {"partition": "gpu", "account": "physics"}) == 1
    assert value("slurm_green_capped_jobs", {"partition": "a100", "account": "bio"}) is None  # forged token
    assert value("slurm_green_actions_total", {"kind": "SetDecision", "outcome": "permission_denied"}) == 1
    assert value("slurm_green_actions_total", {"kind": "SetStartTime", "outcome": "ok"}) == 1
    assert value("slurm_green_estimated_saved_kg_co2") == 0.4
    assert value("slurm_green_estimated_saved_kwh") == 0.25
    assert value("slurm_green_tick_duration_seconds_sum") == 0.42
    assert value("slurm_green_paused") == 0


def test_no_label_grows_with_the_workload(tmp_path):
    """Labels are partition, account, kinds and sources: never a job id, user or time."""
    families = text_string_to_metric_families(generate_latest(observed(tmp_path).registry).decode())
    labels = {name for family in families for sample in family.samples for name in sample.labels}
    assert labels <= {"partition", "account", "decision", "kind", "outcome", "source", "synthetic", "method", "le"}


def test_without_a_forecast_the_intensity_is_nan_and_no_source_is_named():
    m = ControllerMetrics()
    m.observe(TickReport(now=NOW))
    assert math.isnan(m.registry.get_sample_value("slurm_green_carbon_intensity_g_per_kwh"))
    assert not [s for s in m.registry.collect() if s.name == "slurm_green_carbon_source_info"][0].samples


def test_every_metric_the_dashboard_queries_is_exported(tmp_path):
    exported = {sample.name for family in observed(tmp_path).registry.collect() for sample in family.samples}
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    named = {name for query in queries for name in re.findall(r"\bslurm_green_[a-z0-9_]+", query)}
    assert len(queries) >= 10 and named, "the dashboard queries nothing"
    assert named <= exported, sorted(named - exported)
