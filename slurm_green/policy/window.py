"""Carbon-aware start times with a guarantee (the controller's first policy).

Each managed job starts in the lowest-carbon window its flexibility allows and never
after its deadline; a job whose best window is now is released at once. This is the
"Let's Wait Awhile" / CATS idea. It also gives each job that accepts one a fixed,
energy-efficient GPU power cap (Zeus finds the energy-optimal cap near 60-80 % of
the board limit for most models). Runtime and energy come from the models of the GPU
type the job will run on; a cap the type's board cannot set is raised to the lowest
one it can (``allowed_caps``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slurm_green.core.cluster import Job
from slurm_green.core.decision import DecisionContext
from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.green_options import GreenOptions
from slurm_green.core.models import ModelRegistry
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.core.time_limit import partition_limits
from slurm_green.core.models import Config
from slurm_green.policy.gpu_types import cluster_gpu_types
from slurm_green.policy.managed import asked_runtime_s, deadline_of, managed_pending


@dataclass(frozen=True)
class WindowRun:
    """One pending job as the window policy plans it, before its start is chosen."""

    job: Job
    gpu_type: str | None
    gpus: int
    cap: float | None
    runtime_s: float  #: at ``cap``, from the time limit (all Slurm knows)
    energy_kwh: float
    as_asked_kwh: float  #: requested GPUs, no cap
    latest: float  #: the deadline, or now if it has passed


@dataclass(frozen=True)
class WindowPolicy:
    name: str = "window"
    #: Fraction of the board's maximum power limit; ``None`` leaves GPUs uncapped.
    cap_fraction: float | None = 0.7
    #: Runtime assumed for a job without a time limit when choosing its window.
    default_runtime_s: float = 3600.0

    def _runtime(self, job: Job) -> float:
        """The job's limit now (a running or unmanaged job's: what Slurm ends it by), else the default."""
        return job.time_limit_s if job.time_limit_s else self.default_runtime_s

    def _cap(self, models: ModelRegistry, gpu: str | None) -> float | None:
        """The fixed cap on ``gpu``: ``cap_fraction``, or the board's lowest if that is higher."""
        if self.cap_fraction is None:
            return None
        allowed = models.allowed_caps(gpu, accept_cap=True, floor=self.cap_fraction)
        return min(allowed)

    def _run(self, job: Job, options: GreenOptions, models: ModelRegistry, now: float, gpu: str | None,
             limits: Mapping[str, float | None]) -> WindowRun:
        """The job's cap, runtime and energy on ``gpu``: everything but its start (``limits``:
        ``partition_limits``, for a job submitted without a limit)."""
        cap = self._cap(models, gpu) if options.accept_cap else None
        model = models.for_job(job.name, gpu)
        config = Config(gpus=max(1, job.total_gpus), nodes=job.num_nodes, cap_fraction=cap or 1.0)
        full = Config(gpus=config.gpus, nodes=config.nodes)
        asked = asked_runtime_s(job, options, limits, self.default_runtime_s)
        runtime = asked * model.throughput(full) / model.throughput(config)
        return WindowRun(job=job, gpu_type=gpu, gpus=config.gpus, cap=cap, runtime_s=runtime,
                         energy_kwh=model.power_w(config) * runtime / 3.6e6,
                         as_asked_kwh=model.power_w(full) * asked / 3.6e6,
                         latest=max(now, deadline_of(job, options)))

    def _decision(self, run: WindowRun, start: float, forecast: CarbonForecast | None, now: float,
                  note: str = "") -> JobDecision:
        """The decision to start ``run`` at ``start`` (now without a forecast), with its reason and carbon."""
        job, runtime, energy_kwh = run.job, run.runtime_s, run.energy_kwh
        if forecast is None:
            return JobDecision(job.job_id, start_at=now, power_cap_fraction=run.cap,
                               reason="no carbon forecast: start now (carbon-agnostic)",
                               expected_runtime_s=runtime, expected_energy_kwh=energy_kwh,
                               energy_as_asked_kwh=run.as_asked_kwh, gpu_type=run.gpu_type)
        intensity = float(forecast.mean_over(start, start + runtime))
        intensity_now = float(forecast.mean_over(now, now + runtime))
        if start <= now:
            reason = f"best window is now ({intensity:.0f} g/kWh)"
        else:
            reason = (f"deferred {((start - now) / 3600):.1f} h to a {intensity:.0f} g/kWh window "
                      f"(now {intensity_now:.0f}); deadline {((run.latest - now) / 3600):.1f} h away")
        return JobDecision(
            job.job_id, start_at=start, power_cap_fraction=run.cap, reason=reason + note,
            expected_runtime_s=runtime, expected_energy_kwh=energy_kwh,
            expected_carbon_kg=energy_kwh * intensity / 1000.0,
            carbon_if_now_kg=energy_kwh * intensity_now / 1000.0,
            energy_as_asked_kwh=run.as_asked_kwh, gpu_type=run.gpu_type,
        )

    def _decide(self, run: WindowRun, forecast: CarbonForecast | None, now: float) -> JobDecision:
        """Each job alone: its own lowest-carbon start before its deadline (capacity-blind, as CATS)."""
        if forecast is None:
            return self._decision(run, now, None, now)
        start = float(forecast.best_start(now, run.latest, run.runtime_s))
        return self._decision(run, start, forecast, now)

    def _runs(self, context: DecisionContext) -> list[WindowRun]:
        types = cluster_gpu_types(context.snapshot, context.memo)
        limits = partition_limits(context.snapshot)
        return [self._run(job, options, context.models, context.now, types.of(job), limits)
                for job, options in managed_pending(context.snapshot)]

    def __call__(self, context: DecisionContext) -> Plan:
        decisions = tuple(self._decide(run, context.forecast, context.now) for run in self._runs(context))
        return Plan(decisions=decisions, notes=carbon_agnostic_notes(context.forecast))


def carbon_agnostic_notes(forecast: CarbonForecast | None) -> tuple[str, ...]:
    """The plan's note when no forecast answered (every managed job is then released)."""
    return () if forecast is not None else ("carbon-agnostic: every managed job is released",)
