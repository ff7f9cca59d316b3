"""Prometheus metrics of the controller, so that an admin sees it work (or not)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from slurm_green.controller.tick import TickReport


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.ticks = Counter("slurm_green_ticks", "Controller ticks run", registry=self.registry)
        self.tick_errors = Counter("slurm_green_tick_errors", "Ticks that failed before enacting", registry=self.registry)
        self.last_tick = Gauge("slurm_green_last_tick_timestamp_seconds", "Time of the last completed tick",
                               registry=self.registry)
        self.pending = Gauge("slurm_green_pending_jobs", "Pending jobs in the last snapshot", registry=self.registry)
        self.decisions = Gauge("slurm_green_decisions", "Decisions in the last plan", registry=self.registry)
        self.action_failures = Counter("slurm_green_action_failures", "Actions the backend refused",
                                       registry=self.registry)
        self.carbon_available = Gauge("slurm_green_carbon_available",
                                      "1 if a carbon source answered in the last tick, else 0 (carbon-agnostic)",
                                      registry=self.registry)

    def observe(self, report: TickReport) -> None:
        self.ticks.inc()
        self.last_tick.set(report.now)
        self.pending.set(report.pending)
        self.decisions.set(len(report.plan.decisions))
        self.action_failures.inc(len(report.failures))
        self.carbon_available.set(1 if report.carbon_source else 0)

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)
