"""The window baseline with the cluster's capacity in view (``window-aware``).

The capacity-blind window policy (``policy/window.py``, what users of CATS do) lets
every job pick its own cleanest window; on a loaded cluster they all pick the same one
and queue past it, so the blind baseline can emit *more* than FIFO. A fair carbon-aware
yardstick must know the capacity. This one keeps a GPU-time profile per forecast period
(``policy/occupancy.py``): running jobs hold their GPUs until their time limit, pending
jobs that are not managed from the first start with room (Slurm starts them as soon as it
can), then the managed pending jobs are placed one by one, **greedily in deadline order**
(then submit time, then job id), each at the lowest-carbon start that still has room for
its GPU-time over its whole run, never after its deadline; a job for which no start
cleaner than now has room is released now (it queues as under FIFO, and its GPU-time is
held from the first start with room). Each placed job's GPU-time is committed, so the
jobs after it see it.

Greedy, not optimal: an earlier-deadline job may take a window a later one needed more.
The starts tried are those of ``CarbonSignal.start_candidates`` (period boundaries, and
boundaries less the runtime, now and the deadline), so a start between two of them that
would just fit is not found. Runtimes are time limits (all Slurm knows), which over-state
runs and so under-fill windows. On a cluster too big to fill it decides exactly as the
blind policy. Each GPU type is its own pool (``gpu_pools``): a job only fills its type.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_green.carbon.signal import below, earliest_best
from slurm_green.core.cluster import ClusterSnapshot, Job
from slurm_green.core.decision import DecisionContext
from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.policy.gpu_types import gpu_pools
from slurm_green.policy.managed import managed_pending
from slurm_green.policy.occupancy import GpuTimeProfile
from slurm_green.policy.window import WindowPolicy, WindowRun, carbon_agnostic_notes


@dataclass(frozen=True)
class CapacityAwareWindowPolicy(WindowPolicy):
    """``WindowPolicy``'s caps, runtimes and reasons; starts chosen against a GPU-time profile (module doc)."""

    name: str = "window-aware"

    def __call__(self, context: DecisionContext) -> Plan:
        forecast, now = context.forecast, context.now
        runs = self._runs(context)
        if forecast is None:
            return Plan(decisions=tuple(self._decide(run, None, now) for run in runs),
                        notes=carbon_agnostic_notes(None))
        by_id = {run.job.job_id: run for run in runs}
        decided: dict[int, JobDecision] = {}
        for _, pool in gpu_pools(context.snapshot, context.memo, context.models):
            profile = self._committed(pool, forecast, now)
            pending = [by_id[job.job_id] for job in pool.jobs if job.job_id in by_id]
            for run in sorted(pending, key=lambda r: (r.latest, r.job.submit_time, r.job.job_id)):
                decided[run.job.job_id] = self._place(run, profile, forecast, now)
        return Plan(decisions=tuple(decided[run.job.job_id] for run in runs))

    def _committed(self, pool: ClusterSnapshot, forecast: CarbonForecast, now: float) -> GpuTimeProfile:
        """The pool's profile with what is already committed: running jobs, unmanaged pending ones."""
        profile = GpuTimeProfile.on_grid(now, forecast.start, forecast.step, pool.gpus_total)
        managed = {job.job_id for job, _ in managed_pending(pool)}
        for job in pool.jobs:
            if job.is_pending and job.job_id not in managed:
                profile.commit(profile.earliest_room(self._runtime(job), job.total_gpus), self._runtime(job),
                               job.total_gpus)
            elif not job.is_pending:
                profile.commit(now, self._left(job, now), job.total_gpus)
        return profile

    def _left(self, job: Job, now: float) -> float:
        """A started job's time left to its limit (none once past it: Slurm ends it there)."""
        started = job.start_time if job.start_time is not None else now
        return max(0.0, started + self._runtime(job) - now)

    def _place(self, run: WindowRun, profile: GpuTimeProfile, forecast: CarbonForecast, now: float) -> JobDecision:
        """``run`` at its cleanest start with room, if cleaner than now, else now; committed either way.

        A start no cleaner than now is never taken, even when now has no room: deferring
        then buys no carbon and only keeps the job out of Slurm's queue (it could start
        sooner than its predecessors' time limits say). A job released now without room
        queues, so its GPU-time is held from the first start with room
        (``GpuTimeProfile.earliest_room``), not stacked onto now: otherwise the windows
        after the queue look empty and later jobs are deferred into them.
        """
        starts, means = forecast.start_candidates(now, run.latest, run.runtime_s)
        room = profile.fits(starts, run.runtime_s, run.gpus)
        room[1:] &= below(means[1:], means[0])  # starts[0] is now: a later start must be cleaner than now
        if room.any():
            start = held_from = float(starts[room][earliest_best(means[room])])
            note = "" if start == starts[earliest_best(means)] else "; cleaner starts are full"
        else:
            start, note = now, "; no start cleaner than now has room: released now"
            held_from = profile.earliest_room(run.runtime_s, run.gpus)  # it queues: held from where it can start
        profile.commit(held_from, run.runtime_s, run.gpus)
        return self._decision(run, start, forecast, now, note)
