"""One controller tick: snapshot, decide, plan, enact, record.

``Controller.tick(now)`` is a plain function of injected parts, so the daemon, the
tests and the simulator call the very same code; only the backend differs.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from slurm_green.carbon.failures import FailureLog
from slurm_green.controller.budget import PeriodBudget
from slurm_green.controller.enactment import enact
from slurm_green.controller.planner import enactable, enactable_actions, plan_actions, remember_sizes
from slurm_green.controller.resize import Resizer
from slurm_green.controller.store import StateStore
from slurm_green.core.actions import Action, ActionResult
from slurm_green.core.backend import ClusterBackend
from slurm_green.core.cluster import ClusterSnapshot
from slurm_green.core.decision import DecisionContext, DecisionMemo
from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.gpu_freq import Enactment
from slurm_green.core.green_options import parse_marker
from slurm_green.core.models import ModelProvenance, ModelRegistry, Observation, TelemetrySink
from slurm_green.core.plan import Plan, Policy, replace_decision
from slurm_green.core.text import displayable

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 3600.0  # pruning is a few DELETEs: hourly keeps the store bounded at no cost
#: A forecast ending less than this short of now + the horizon gets no note: the minutes since the last
#: refresh, or a provider ending its forecast a period early, would otherwise be noted every few ticks.
SHORT_FORECAST_SLACK_S = 3600.0


class CarbonReading(Protocol):
    """One answer of the feed (``carbon.feed.CarbonSnapshot``)."""

    @property
    def signal(self) -> CarbonForecast: ...  # a ``slurm_green.carbon.signal.CarbonSignal``
    @property
    def source(self) -> str: ...  # which source answered
    @property
    def synthetic(self) -> bool: ...  # made-up numbers: every display says so


class TelemetrySource(Protocol):
    """Measurements of finished jobs, each handed over once: the Epilogs' metered energy on
    Slurm (``controller.telemetry.MeteredEnergy``), the simulated truth in the simulator."""

    def observations(self, now: float, snapshot: ClusterSnapshot) -> list[Observation]: ...


class CarbonFeed(Protocol):
    """Where a tick gets its forecast (``slurm_green.carbon.feed.CarbonFeed``).

    It answers from memory, never waiting on the network; it raises when no source
    has usable data, and the tick then runs the policy carbon-agnostically
    (``forecast=None``) and says so.
    """

    def snapshot(self, now: float | None = None) -> CarbonReading: ...

    @property
    def horizon_s(self) -> float: ...  # how far ahead the forecast is asked for ([carbon] horizon_h)


def stamped(plan: Plan, models: ModelRegistry, snapshot: ClusterSnapshot) -> Plan:
    """The plan with each decision naming the model parameters it was made with
    (``models.params_id``), so a stored decision can be traced to the exact fit behind it, and
    what those models assumed for its job rather than fitted (``models.assumed``: its name
    matches no modelled job type, its GPU type was not profiled), so ``why`` can say its model
    was a guess. The one place every policy's decisions get both; a decision for a job the
    snapshot lacks keeps ``model_assumed`` unrecorded. ``assumed`` is memoised per name: this
    runs for every decision of every tick, in the simulator too."""
    if not isinstance(models, ModelProvenance):
        return plan
    params_id, decisions = models.params_id, []
    for decision in plan.decisions:
        job = snapshot.job(decision.job_id)
        assumed = models.assumed(job.name, decision.gpu_type) if job is not None else None
        decisions.append(replace_decision(decision, model_params=params_id, model_assumed=assumed))
    return dataclasses.replace(plan, decisions=tuple(decisions))


@dataclass
class TickReport:
    now: float
    plan: Plan = field(default_factory=Plan)
    actions: list[Action] = field(default_factory=list)
    results: list[ActionResult] = field(default_factory=list)
    carbon_source: str | None = None
    #: The carbon signal the policy saw (``None``: carbon-agnostic).
    forecast: CarbonForecast | None = None
    notes: list[str] = field(default_factory=list)
    pending: int = 0

    @property
    def failures(self) -> list[ActionResult]:
        return [r for r in self.results if not r.ok]


@dataclass
class Controller:
    backend: ClusterBackend
    policy: Policy
    carbon: CarbonFeed | None
    models: ModelRegistry
    store: StateStore | None = None
    sign: Callable[[int, dict[str, object]], str] | None = None
    verify: Callable[[int, str], dict[str, object]] | None = None
    dry_run: bool = False
    gpu_enact: Enactment = "power_cap"
    #: Measurements that refine the models (None: none).
    telemetry: TelemetrySource | None = None
    #: How long the store keeps ended jobs and old ticks (None: for ever).
    retention_s: float | None = None
    #: A budget per period, paced from what the store accounted (None: the policy's own budget only).
    budget: PeriodBudget | None = None
    #: Resizes running elastic jobs by checkpoint and requeue (None: running jobs are never touched).
    resizer: Resizer | None = None
    #: What the policy keeps between this controller's decisions (``core.decision``).
    memo: DecisionMemo = field(default_factory=DecisionMemo, repr=False)
    _pruned_at: float = field(default=float("-inf"), repr=False)
    _sizes_read: bool = field(default=False, repr=False)
    _carbon_log: FailureLog = field(default_factory=lambda: FailureLog(
        log, failing="carbon data unavailable, running carbon-agnostic (deferred jobs are released): {why}",
        back="carbon data available again ({name})"), repr=False)

    def __post_init__(self) -> None:
        plans_under_a_budget = getattr(self.policy, "budget_fraction", None) is not None
        if self.resizer is not None and self.resizer.store is not self.store:
            raise ValueError("resizing running jobs keeps its steps in the controller's own state store")
        if self.budget is not None and (self.store is None or not plans_under_a_budget):
            raise ValueError(f"a period budget needs a state store and a policy that plans under a budget "
                             f"(greenflow, powerflow); {self.policy.name} cannot keep one")

    def _budget_scale(self, now: float, report: TickReport) -> float:
        """The multiple of the policy's budget this tick may spend: with a period budget, the pace
        of this period's spending so far (``controller/budget.py``); else 1."""
        if self.budget is None or self.store is None:
            return 1.0
        status = self.budget.status(self.store, now)
        report.notes.append(status.note(now))
        return status.scale

    def _forecast(self, now: float, report: TickReport) -> CarbonForecast | None:
        if self.carbon is None:
            report.notes.append("no carbon source configured: carbon-agnostic")
            return None
        try:
            reading = self.carbon.snapshot(now)
        except Exception as exc:  # any failing source must degrade, never stop the tick
            report.notes.append(f"carbon data unavailable ({exc}): carbon-agnostic, deferred jobs are released")
            self._carbon_log.failed("carbon", exc)  # logged once per change, not every tick
            return None
        self._carbon_log.answered("carbon")
        report.carbon_source = reading.source
        signal, horizon_s = reading.signal, self.carbon.horizon_s
        if signal.end < now + horizon_s - SHORT_FORECAST_SLACK_S:  # the signal holds its last value after its end
            report.notes.append(f"carbon forecast covers {max(signal.end - now, 0.0) / 3600:.1f} h of the "
                                f"{horizon_s / 3600:g} h horizon: the last value "
                                f"({float(signal.value_at(signal.end)):.0f} g/kWh) is held beyond it")
        return signal

    def decide(self, now: float) -> tuple[TickReport, ClusterSnapshot]:
        """Snapshot, forecast, policy and planning, without changing anything."""
        report = TickReport(now=now)
        snapshot = self.backend.snapshot()
        if not self._sizes_read and self.store is not None:  # an earlier run's, for planner.within_site_limits
            remember_sizes(self.memo, self.store.asked_sizes(job.job_id for job in snapshot.jobs if job.is_pending))
            self._sizes_read = True
        report.pending = len(snapshot.pending())
        report.forecast = forecast = self._forecast(now, report)
        # the plan as it can be enacted (co-locations, each pair under one cap; no job slowed past its
        # partition's MaxTime): what is stored is what is sent
        progress = self.resizer.reports(snapshot, now) if self.resizer is not None else {}
        measured = self.resizer.measured(snapshot) if self.resizer is not None else {}
        plan = self.policy(DecisionContext(snapshot, forecast, self.models, now, self.memo,
                                           self._budget_scale(now, report), progress, measured))
        report.plan, sharing = enactable(stamped(plan, self.models, snapshot), snapshot, self.verify, self.memo)
        report.notes.extend(report.plan.notes)
        if self.resizer is not None:  # running jobs in a resize are its own, not the planner's
            resizing, owned, notes = self.resizer.plan(snapshot, report.plan, now)
            report.notes.extend(notes)
            plan = dataclasses.replace(report.plan, decisions=tuple(
                d for d in report.plan.decisions if d.job_id not in owned))
            # Without the resizer's jobs a pair's cap may differ (``colocate``): made enactable again.
            report.actions = plan_actions(snapshot, plan, now, self.sign, self.verify, self.gpu_enact,
                                          self.memo) + resizing
        else:
            report.actions = enactable_actions(snapshot, report.plan, sharing, now, self.sign, self.verify,
                                               self.gpu_enact)
        return report, snapshot

    def tick(self, now: float) -> TickReport:
        """One tick. Decisions and the intended actions are stored before anything is
        enacted, the actions' outcomes after: killed in between, the next tick re-derives
        the same decisions (not stored twice), finds the enacted actions in force (not
        repeated), and the audit trail shows the interrupted actions as intended with no
        outcome. Starts are enacted last, only where the rest of the job's decision took
        (``enactment.enact``)."""
        report, snapshot = self.decide(now)
        store = self.store if not self.dry_run else None  # what is recorded, and where
        if store is not None:
            managed = [job for job in snapshot.jobs if parse_marker(job.admin_comment)]
            store.observe_jobs(now, managed)
            store.account_usage(now, managed, report.forecast)
            store.record_decisions(now, report.plan.decisions)
        if not self.dry_run:
            intents = store.record_intents(now, report.actions) if store is not None else []
            report.results = enact(self.backend, report.actions)
            if store is not None:
                store.record_outcomes(intents, report.results)
            if self.resizer is not None:
                self.resizer.record(now, report.actions, report.results)
            for failure in report.failures:
                log.warning("job %s: %s failed: %s %s", failure.action.job_id, type(failure.action).__name__,
                            failure.error.value if failure.error else "", displayable(failure.message))
        if self.telemetry is not None and not self.dry_run:
            report.notes.extend(self._learn(self.telemetry, now, snapshot))
        if store is not None:
            store.record_tick(now, self.policy.name, report.carbon_source, report.notes, report.pending,
                              len(report.plan.decisions), report.results)
            if self.retention_s is not None and now - self._pruned_at >= PRUNE_EVERY_S:
                self._pruned_at = now
                forgotten = store.prune(now - self.retention_s)
                log.info("store: forgot %d job(s) older than %.0f days", forgotten, self.retention_s / 86400)
        log.info("tick %.0f: %d pending, %d decisions, %d actions, %d failed", now, report.pending,
                 len(report.plan.decisions), len(report.actions), len(report.failures))
        return report

    def _learn(self, telemetry: TelemetrySource, now: float, snapshot: ClusterSnapshot) -> list[str]:
        """Fold finished jobs' measurements into the models (``observe``), so later
        decisions use what was measured. Never fails the tick."""
        models = self.models  # a core.models.TelemetrySink, or models that do not learn
        try:
            observations = telemetry.observations(now, snapshot)
            if isinstance(models, TelemetrySink):
                for seen in observations:
                    models.learn(seen)  # the board's limits, then throughput and power on that GPU type
        except Exception as exc:  # a broken spool or model must not stop scheduling
            log.warning("telemetry not read: %s", exc)
            return [f"telemetry not read ({exc})"]
        return [f"{len(observations)} measurement(s) of finished jobs taught the models"] if observations else []
