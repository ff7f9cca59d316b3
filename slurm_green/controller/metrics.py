"""Prometheus metrics of the controller, so that an admin sees it work (or not) and can graph it.

What each tick exports (slurm_green/templates/grafana/slurm-green.json draws them; docs/operations.md
lists them): the carbon intensity now, which source answered and whether it is
synthetic, deferred jobs, decisions and actions by kind, caps in force, the estimated
carbon saved and the energy accounted, tick duration and failures, and whether an
admin paused the controller.

Cardinality is bounded by the site, never by the workload: no metric has a job,
user or time label. Jobs are counted per ``partition`` and ``account`` (both defined
by the admin, both on every job in ``squeue``/``sacct`` and in the usual Slurm
exporters, so a panel can be joined to the cluster's own job metrics on them);
actions per ``kind`` (the twelve action classes) and ``outcome`` (``ok`` or one of
``ActionError``'s seven values); the source per configured source name. Per-job
figures stay in the store (``slurm-green report``, ``why``), not in Prometheus.

The savings and energy gauges are recomputed from the store after each tick through
``report.job_rows``, the report's own rule, so Grafana and ``report`` cannot disagree:
0.4-0.6 s for 10,000 retained jobs of 3 decisions and 2 actions each on a 2-core
machine, against a 300 s interval. A site keeping far more jobs should shorten
``retention_days`` or move these totals to an SQL aggregate.
"""

from __future__ import annotations

import logging
import math
from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from slurm_green.controller.report import job_rows, totals
from slurm_green.controller.tick import Controller, TickReport
from slurm_green.core.cluster import ClusterSnapshot, Job
from slurm_green.core.decision_token import InvalidToken, find_token
from slurm_green.core.green_options import parse_marker

log = logging.getLogger(__name__)

#: A decided start this far after the tick counts as deferred (the planner's tolerance).
DEFERRED_AFTER_S = 60.0
_JOB_LABELS = ("partition", "account")


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        self.ticks = Counter("slurm_green_ticks", "Controller ticks run", registry=r)
        self.tick_errors = Counter("slurm_green_tick_errors", "Ticks that failed before enacting", registry=r)
        self.tick_duration = Histogram("slurm_green_tick_duration_seconds", "Wall time of a tick, failed ones too",
                                       buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120), registry=r)
        self.last_tick = Gauge("slurm_green_last_tick_timestamp_seconds", "Time of the last completed tick",
                               registry=r)
        self.pending = Gauge("slurm_green_pending_jobs", "Pending jobs in the last snapshot", registry=r)
        self.decisions = Gauge("slurm_green_decisions", "Decisions in the last plan", registry=r)
        self.decisions_by_kind = Gauge("slurm_green_plan_decisions", "Decisions in the last plan by what they do",
                                       ["decision"], registry=r)
        self.actions = Counter("slurm_green_actions", "Actions sent to Slurm, by kind and outcome",
                               ["kind", "outcome"], registry=r)
        self.action_failures = Counter("slurm_green_action_failures", "Actions the backend refused", registry=r)
        self.carbon_available = Gauge("slurm_green_carbon_available",
                                      "1 if a carbon source answered in the last tick, else 0 (carbon-agnostic)",
                                      registry=r)
        self.intensity = Gauge("slurm_green_carbon_intensity_g_per_kwh",
                               "Grid carbon intensity now, from the forecast the tick used (NaN: none)", registry=r)
        self.source = Gauge("slurm_green_carbon_source_info", "1 for the source that answered the last tick",
                            ["source", "synthetic"], registry=r)
        self.deferred = Gauge("slurm_green_deferred_jobs", "Managed pending jobs the last plan starts later",
                              _JOB_LABELS, registry=r)
        self.capped = Gauge("slurm_green_capped_jobs", "Running managed jobs under a signed power cap below 100%",
                            _JOB_LABELS, registry=r)
        self.paused = Gauge("slurm_green_paused", "1 while an admin has paused the controller (slurm-green pause)",
                            registry=r)
        self.saved_kg = Gauge("slurm_green_estimated_saved_kg_co2",
                              "Estimated kg CO2 saved against starting each job when first seen (jobs in the store)",
                              registry=r)
        self.saved_kwh = Gauge("slurm_green_estimated_saved_kwh",
                               "Estimated kWh saved against each job as asked (requested GPUs, no cap; jobs in the store)",
                               registry=r)
        self.energy_kwh = Gauge("slurm_green_energy_kwh",
                                "Energy of the jobs in the store: modelled while they ran, or metered by the Epilog",
                                ["method"], registry=r)
        self.carbon_kg = Gauge("slurm_green_run_carbon_kg_co2", "kg CO2 of the jobs in the store, accounted as they ran",
                               registry=r)

    def observe(self, report: TickReport, duration_s: float = 0.0, controller: Controller | None = None) -> None:
        """A completed tick; ``controller`` gives the snapshot, the decision key and the store behind the labels."""
        self.ticks.inc()
        self.tick_duration.observe(duration_s)
        self.last_tick.set(report.now)
        self.pending.set(report.pending)
        self.decisions.set(len(report.plan.decisions))
        self.action_failures.inc(len(report.failures))
        for result in report.results:
            self.actions.labels(type(result.action).__name__, "ok" if result.ok else
                                (result.error.value if result.error else "other")).inc()
        self.carbon_available.set(1 if report.carbon_source else 0)
        self._carbon(report, controller)
        self._plan(report, controller)
        if controller is not None:
            self.paused.set(1 if getattr(controller.policy, "paused", False) else 0)
            self._capped(controller)
            self._store(controller)

    def tick_failed(self, duration_s: float) -> None:
        self.tick_errors.inc()
        self.tick_duration.observe(duration_s)

    def _carbon(self, report: TickReport, controller: Controller | None) -> None:
        signal = report.forecast
        self.intensity.set(float(signal.value_at(report.now)) if signal is not None else math.nan)
        self.source.clear()
        if report.carbon_source:
            feed = controller.carbon if controller is not None else None
            synthetic = False
            try:
                synthetic = feed is not None and bool(feed.snapshot(report.now).synthetic)
            except Exception:  # the feed answered this tick; if it cannot now, say not synthetic rather than fail
                pass
            self.source.labels(report.carbon_source, str(synthetic).lower()).set(1)

    def _plan(self, report: TickReport, controller: Controller | None) -> None:
        jobs = _jobs_by_id(controller)
        later = [d for d in report.plan.decisions if d.start_at is not None and d.start_at > report.now + DEFERRED_AFTER_S]
        kinds = Tally("deferred" if d in later else "start_now" for d in report.plan.decisions)
        kinds.update("capped" for d in report.plan.decisions if d.power_cap_fraction is not None
                     and d.power_cap_fraction < 1)
        kinds.update("resized" for d in report.plan.decisions if d.gpus_per_node is not None)
        self.decisions_by_kind.clear()
        for kind in ("deferred", "start_now", "capped", "resized"):
            self.decisions_by_kind.labels(kind).set(kinds[kind])
        self.deferred.clear()
        for labels, n in Tally(_labels(jobs.get(d.job_id)) for d in later).items():
            self.deferred.labels(*labels).set(n)

    def _capped(self, controller: Controller) -> None:
        snapshot, verify = _snapshot(controller), controller.verify
        self.capped.clear()
        if snapshot is None or verify is None:
            return
        counts: Tally[tuple[str, str]] = Tally()
        for job in snapshot.running():
            token = find_token(job.comment) if parse_marker(job.admin_comment) else None
            try:
                cap = verify(job.job_id, token).get("cap") if token else None
            except InvalidToken:
                continue
            if isinstance(cap, (int, float)) and cap < 1:
                counts[_labels(job)] += 1
        for labels, n in counts.items():
            self.capped.labels(*labels).set(n)

    def _store(self, controller: Controller) -> None:
        """Totals over the jobs the store keeps (its retention): read, never written, here."""
        if controller.store is None:
            return
        rows = job_rows(controller.store)
        summary = totals(rows)
        self.saved_kg.set(summary["saved_kg"])
        self.saved_kwh.set(summary["saved_kwh"])
        for method, key in (("modelled", "run_energy_kwh"), ("metered", "metered_energy_kwh")):
            self.energy_kwh.labels(method).set(sum(float(r[key]) for r in rows if r[key] is not None))
        self.carbon_kg.set(sum(float(r["run_carbon_kg"]) for r in rows if r["run_carbon_kg"] is not None))

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)


def _snapshot(controller: Controller | None) -> ClusterSnapshot | None:
    return getattr(controller.policy, "last_snapshot", None) if controller is not None else None


def _jobs_by_id(controller: Controller | None) -> dict[int, Job]:
    snapshot = _snapshot(controller)
    return {job.job_id: job for job in snapshot.jobs} if snapshot is not None else {}


def _labels(job: Job | None) -> tuple[str, str]:
    """A job's (partition, account); ``unknown`` when the snapshot lacks it."""
    if job is None:
        return ("unknown", "unknown")
    return (job.partition or "unknown", job.account or "unknown")
