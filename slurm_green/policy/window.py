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

from dataclasses import dataclass

from slurm_green.core.cluster import Job
from slurm_green.core.decision import DecisionContext
from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.green_options import GreenOptions
from slurm_green.core.models import ModelRegistry
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.core.models import Config
from slurm_green.policy.gpu_types import cluster_gpu_types
from slurm_green.policy.managed import deadline_of, managed_pending


@dataclass(frozen=True)
class WindowPolicy:
    name: str = "window"
    #: Fraction of the board's maximum power limit; ``None`` leaves GPUs uncapped.
    cap_fraction: float | None = 0.7
    #: Runtime assumed for a job without a time limit when choosing its window.
    default_runtime_s: float = 3600.0

    def _runtime(self, job: Job) -> float:
        return job.time_limit_s if job.time_limit_s else self.default_runtime_s

    def _cap(self, models: ModelRegistry, gpu: str | None) -> float | None:
        """The fixed cap on ``gpu``: ``cap_fraction``, or the board's lowest if that is higher."""
        if self.cap_fraction is None:
            return None
        allowed = models.allowed_caps(gpu, accept_cap=True, floor=self.cap_fraction)
        return min(allowed)

    def _decide(self, job: Job, options: GreenOptions, forecast: CarbonForecast | None, models: ModelRegistry,
                now: float, gpu: str | None) -> JobDecision:
        cap = self._cap(models, gpu) if options.accept_cap else None
        model = models.for_job(job.name, gpu)
        config = Config(gpus=max(1, job.total_gpus), nodes=job.num_nodes, cap_fraction=cap or 1.0)
        full = Config(gpus=config.gpus, nodes=config.nodes)
        runtime = self._runtime(job) * model.throughput(full) / model.throughput(config)
        energy_kwh = model.power_w(config) * runtime / 3.6e6
        as_asked_kwh = model.power_w(full) * self._runtime(job) / 3.6e6
        latest = max(now, deadline_of(job, options))
        if forecast is None:
            return JobDecision(job.job_id, start_at=now, power_cap_fraction=cap,
                               reason="no carbon forecast: start now (carbon-agnostic)",
                               expected_runtime_s=runtime, expected_energy_kwh=energy_kwh,
                               energy_as_asked_kwh=as_asked_kwh, gpu_type=gpu)
        start = forecast.best_start(now, latest, runtime)
        intensity = float(forecast.mean_over(start, start + runtime))
        intensity_now = float(forecast.mean_over(now, now + runtime))
        if start <= now:
            reason = f"best window is now ({intensity:.0f} g/kWh)"
        else:
            reason = (f"deferred {((start - now) / 3600):.1f} h to a {intensity:.0f} g/kWh window "
                      f"(now {intensity_now:.0f}); deadline {((latest - now) / 3600):.1f} h away")
        return JobDecision(
            job.job_id, start_at=start, power_cap_fraction=cap, reason=reason,
            expected_runtime_s=runtime, expected_energy_kwh=energy_kwh,
            expected_carbon_kg=energy_kwh * intensity / 1000.0,
            carbon_if_now_kg=energy_kwh * intensity_now / 1000.0,
            energy_as_asked_kwh=as_asked_kwh, gpu_type=gpu,
        )

    def __call__(self, context: DecisionContext) -> Plan:
        snapshot, forecast = context.snapshot, context.forecast
        types = cluster_gpu_types(snapshot, context.memo)
        decisions = tuple(self._decide(job, options, forecast, context.models, context.now, types.of(job))
                          for job, options in managed_pending(snapshot))
        notes = () if forecast is not None else ("carbon-agnostic: every managed job is released",)
        return Plan(decisions=decisions, notes=notes)
