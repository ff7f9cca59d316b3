"""What a simulation measured: per-job outcomes and cluster samples, and their summary.

Energy is the jobs' GPU energy from the models (``energy_kwh``; a shared GPU's pair
power split between its two jobs by their power alone); unallocated GPUs draw
``idle_w_per_gpu`` (``idle_energy_kwh``, from the first arrival to the last end, so a
run that ends later pays for more idle time). Both are reported apart and summed in
``total_energy_kwh`` / ``total_carbon_kg``: a GPU that co-location leaves free still
draws idle power, and a run that packs work onto fewer GPUs saves the difference.
Carbon is energy times the true intensity over exactly when it was drawn: a job's power
changes mid-run (a guest joins or leaves its GPU, a freezing step), so each stretch at one
power is charged its own intensity (``power_changed``), and ``intensity`` is the mean its
energy was drawn at.
A job requeued to change its size (checkpoint-and-requeue) runs more than once: each
run's energy and carbon are its own (``stopped``), ``start`` is its last run's and
``first_start`` its first, which the wait counts from. JCT is completion minus submission. Fragmentation is the time-weighted share of
free GPUs that sit on partly used nodes. Over time: allocated GPUs (``gpu_utilisation``
= allocated share, ``unallocated_share`` its complement), GPUs holding two jobs
(``shared_share`` of the allocated ones) and the jobs' power (``mean_power_w``).
``idle_awake_energy_kwh`` is the part of the idle energy on nodes with something allocated:
what a site whose Slurm suspended idle nodes at once, with no wake-up cost, would still draw,
the yardstick of power-aware placement (PWR). With the cluster's ``suspend_after_s`` set
(Slurm's power saving, ``sim/power_saving.py``) nodes idle that long are suspended: their
GPUs' idle energy is not drawn (``suspended_kwh``, taken out of ``idle_energy_kwh`` and the
totals), and each job that lands on a suspended node waits for it (``resumes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from slurm_green.core.forecast import CarbonForecast
from slurm_green.sim.cluster import ClusterSpec

_J_PER_KWH = 3.6e6


@dataclass
class SimRecord:
    start: np.ndarray
    end: np.ndarray
    gpus: np.ndarray
    nodes: np.ndarray
    cap: np.ndarray
    energy_j: np.ndarray
    intensity: np.ndarray  #: mean g/kWh each job's (last run's) energy was drawn at
    #: Each job's nodes (indices), to compare a placement with Slurm's; empty if it never ran.
    placed: list[tuple[int, ...]] = field(default_factory=list)
    #: Per job: its first start, its runs stopped by a requeue and what they drew (J, g).
    first_start: np.ndarray = field(default_factory=lambda: np.empty(0))
    restarts: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    earlier_energy_j: np.ndarray = field(default_factory=lambda: np.empty(0))
    earlier_carbon_g: np.ndarray = field(default_factory=lambda: np.empty(0))
    sample_t: list[float] = field(default_factory=list)
    sample_busy: list[int] = field(default_factory=list)
    sample_frag: list[float] = field(default_factory=list)
    sample_power_w: list[float] = field(default_factory=list)
    sample_shared: list[int] = field(default_factory=list)
    sample_on_idle_nodes: list[int] = field(default_factory=list)
    idle_energy_kwh: float = 0.0
    idle_awake_energy_kwh: float = 0.0
    idle_carbon_kg: float = 0.0
    #: With Slurm's power saving (``sim/power_saving.py``): (from, to, GPUs) of each stretch a
    #: node spent suspended, what that saved of the idle energy and carbon, and how many jobs
    #: waited for a node to resume.
    suspended: list[tuple[float, float, int]] = field(default_factory=list)
    suspended_kwh: float = 0.0
    suspended_carbon_kg: float = 0.0
    resumes: int = 0
    total_gpus: int = 0
    ended_at: float = 0.0
    #: Each job's time limit: as submitted, then the one in force at its last start (a decision
    #: that slows a job raises it, ``SetTimeLimit``), or raised while it ran (a guest joined its
    #: GPU). Live Slurm stops a job there; the simulator
    #: lets it finish and counts it (``past_limit``).
    time_limit: np.ndarray = field(default_factory=lambda: np.empty(0))
    #: Per job, its run now: since when it draws its present power, and what it drew before
    #: that (J, g), stretch by stretch at the power of each (``power_changed``).
    since: np.ndarray = field(default_factory=lambda: np.empty(0))
    closed_energy_j: np.ndarray = field(default_factory=lambda: np.empty(0))
    closed_carbon_g: np.ndarray = field(default_factory=lambda: np.empty(0))

    @classmethod
    def empty(cls, n: int, time_limit: np.ndarray | None = None) -> "SimRecord":
        nan = lambda: np.full(n, np.nan)  # noqa: E731
        return cls(nan(), nan(), np.zeros(n, np.int64), np.zeros(n, np.int64), nan(), nan(), nan(), [()] * n,
                   first_start=nan(), restarts=np.zeros(n, np.int64), earlier_energy_j=np.zeros(n),
                   earlier_carbon_g=np.zeros(n), time_limit=nan() if time_limit is None else time_limit.copy(),
                   since=nan(), closed_energy_j=np.zeros(n), closed_carbon_g=np.zeros(n))

    def started(self, index: int, start: float, end: float, gpus: int, placed: tuple[int, ...], cap: float,
                energy_j: float, time_limit_s: float | None = None) -> None:
        """Job ``index`` started; ``time_limit_s``: the limit in force then (None: it keeps the last)."""
        self.start[index], self.end[index] = start, end
        if time_limit_s:
            self.time_limit[index] = time_limit_s
        if np.isnan(self.first_start[index]):
            self.first_start[index] = start
        self.gpus[index], self.nodes[index], self.cap[index] = gpus, len(placed), cap
        self.placed[index] = placed
        self.energy_j[index] = energy_j
        self.since[index] = start
        self.closed_energy_j[index] = self.closed_carbon_g[index] = 0.0

    def power_changed(self, index: int, at: float, power_w: float, intensity: float) -> None:
        """Job ``index`` drew ``power_w`` from ``since`` to ``at``, at a mean ``intensity`` (g/kWh)
        then, and draws another power from ``at`` (its ``energy_j`` is re-accounted by the caller)."""
        drawn = power_w * (at - float(self.since[index]))
        self.closed_energy_j[index] += drawn
        self.closed_carbon_g[index] += drawn / _J_PER_KWH * intensity
        self.since[index] = at

    def stopped(self, index: int, unused_j: float, intensity: float) -> None:
        """Job ``index``'s run was stopped (requeued) before its end: it drew its energy less
        ``unused_j`` (what the rest would have), at a mean ``intensity`` (g/kWh) since ``since``
        (its start, or its power's latest change)."""
        used = float(self.energy_j[index]) - unused_j
        self.earlier_energy_j[index] += used
        last = used - float(self.closed_energy_j[index])  # drawn at the power it had when stopped
        self.earlier_carbon_g[index] += float(self.closed_carbon_g[index]) + last / _J_PER_KWH * intensity
        self.restarts[index] += 1
        self.start[index] = self.end[index] = self.energy_j[index] = self.since[index] = np.nan
        self.closed_energy_j[index] = self.closed_carbon_g[index] = 0.0

    def sample(self, t: float, busy: int, frag: float, power_w: float = 0.0, shared: int = 0,
               on_idle_nodes: int = 0) -> None:
        """The cluster from ``t`` on: allocated GPUs, fragmentation, jobs' power, GPUs holding two jobs,
        GPUs of nodes with nothing allocated."""
        if self.sample_t and self.sample_t[-1] == t:
            self.sample_busy[-1], self.sample_frag[-1] = busy, frag
            self.sample_power_w[-1], self.sample_shared[-1] = power_w, shared
            self.sample_on_idle_nodes[-1] = on_idle_nodes
            return
        self.sample_t.append(t)
        self.sample_busy.append(busy)
        self.sample_frag.append(frag)
        self.sample_power_w.append(power_w)
        self.sample_shared.append(shared)
        self.sample_on_idle_nodes.append(on_idle_nodes)

    def finish(self, signal: CarbonForecast, spec: ClusterSpec, now: float) -> None:
        """Close the samples at ``now``; account the jobs' intensity, idle energy and carbon."""
        ran = np.isfinite(self.start)
        # The mean over the stretch at its last power: its whole run unless its power changed.
        self.intensity[ran] = signal.mean_over(self.since[ran], self.end[ran])
        changed = np.flatnonzero(ran & (self.closed_energy_j != 0.0))
        if len(changed):  # the mean its energy was drawn at, stretch by stretch
            total = self.energy_j[changed]
            last = total - self.closed_energy_j[changed]
            carbon_g = self.closed_carbon_g[changed] + last / _J_PER_KWH * self.intensity[changed]
            self.intensity[changed] = np.where(total > 0, carbon_g * _J_PER_KWH / np.where(total > 0, total, 1.0),
                                               self.intensity[changed])
        self.total_gpus = int(spec.gpus)
        self.ended_at = now
        t = self._edges()
        idle = self.total_gpus - np.asarray(self.sample_busy, dtype=np.float64)
        dt = np.diff(t)
        watts = idle * float(spec.idle_w_per_gpu)
        self.idle_energy_kwh = float((watts * dt).sum() / _J_PER_KWH)
        awake = idle - np.asarray(self.sample_on_idle_nodes, dtype=np.float64)
        self.idle_awake_energy_kwh = float((awake * float(spec.idle_w_per_gpu) * dt).sum() / _J_PER_KWH)
        mean = np.asarray(signal.mean_over(t[:-1], t[1:]), dtype=np.float64)
        self.idle_carbon_kg = float((watts * dt * mean).sum() / _J_PER_KWH / 1000.0)
        if self.suspended:  # suspended GPUs drew nothing: the idle energy is what the awake ones drew
            start, end, gpus = (np.array(col, dtype=np.float64) for col in zip(*self.suspended))
            joules = gpus * float(spec.idle_w_per_gpu) * (end - start)
            self.suspended_kwh = float(joules.sum() / _J_PER_KWH)
            self.suspended_carbon_kg = float((joules * np.asarray(signal.mean_over(start, end))).sum()
                                             / _J_PER_KWH / 1000.0)
            self.idle_energy_kwh -= self.suspended_kwh
            self.idle_carbon_kg -= self.suspended_carbon_kg

    def _edges(self) -> np.ndarray:
        """The samples' times closed at ``ended_at``: sample i holds from edge i to edge i + 1."""
        return np.asarray(self.sample_t + [max(self.ended_at, self.sample_t[-1] if self.sample_t else self.ended_at)])

    def jobs_carbon_kg(self, signal: CarbonForecast, start: float, end: float) -> float:
        """The carbon of the jobs' GPU power (no idle power) in ``[start, end)``, from the samples:
        what a budget per period is held to (``benchmarks/period_budget.py``)."""
        t = self._edges()
        lo, hi = np.clip(t[:-1], start, end), np.clip(t[1:], start, end)
        inside = hi > lo
        if not inside.any():
            return 0.0
        mean = np.asarray(signal.mean_over(lo[inside], hi[inside]), dtype=np.float64)
        watts = np.asarray(self.sample_power_w, dtype=np.float64)[inside]
        return float((watts * (hi - lo)[inside] * mean).sum() / _J_PER_KWH / 1000.0)

    def summary(self, submit: np.ndarray) -> dict[str, float]:
        done = np.isfinite(self.end)
        jct = (self.end - submit)[done]
        energy_kwh = self.energy_j[done] / _J_PER_KWH  # each job's last run; earlier runs' apart
        earlier_kwh = self.earlier_energy_j[done] / _J_PER_KWH
        t = np.asarray(self.sample_t + [self.ended_at])
        dt = np.diff(t)
        span = float(dt.sum()) or 1.0
        busy_gpu_s = float((np.asarray(self.sample_busy) * dt).sum())
        shared_gpu_s = float((np.asarray(self.sample_shared) * dt).sum())
        frag = float((np.asarray(self.sample_frag) * dt).sum() / span)
        utilisation = busy_gpu_s / (self.total_gpus * span) if self.total_gpus else float("nan")
        carbon_kg = float((energy_kwh * self.intensity[done] + self.earlier_carbon_g[done]).sum() / 1000.0)
        energy_kwh = energy_kwh + earlier_kwh
        return {
            "jobs": int(len(submit)),
            "finished": int(done.sum()),
            "avg_jct_s": float(jct.mean()) if len(jct) else float("nan"),
            "p50_jct_s": float(np.percentile(jct, 50)) if len(jct) else float("nan"),
            "p99_jct_s": float(np.percentile(jct, 99)) if len(jct) else float("nan"),
            "avg_wait_s": float((self.first_start - submit)[done].mean()) if len(jct) else float("nan"),
            "makespan_s": float(self.end[done].max() - submit.min()) if len(jct) else float("nan"),
            "energy_kwh": float(energy_kwh.sum()),
            "carbon_kg": carbon_kg,
            "idle_energy_kwh": self.idle_energy_kwh,
            "idle_carbon_kg": self.idle_carbon_kg,
            "idle_awake_energy_kwh": self.idle_awake_energy_kwh,
            "suspended_kwh": self.suspended_kwh,
            "resumes": self.resumes,
            "total_energy_kwh": float(energy_kwh.sum()) + self.idle_energy_kwh,
            "total_carbon_kg": carbon_kg + self.idle_carbon_kg,
            "gpu_utilisation": utilisation,
            "unallocated_share": 1.0 - utilisation,
            "shared_share": shared_gpu_s / busy_gpu_s if busy_gpu_s else 0.0,
            "mean_power_w": float((np.asarray(self.sample_power_w) * dt).sum() / span),
            "fragmentation": frag,
            "avg_gpus": float(self.gpus[done].mean()) if len(jct) else float("nan"),
            "avg_cap": float(self.cap[done].mean()) if len(jct) else float("nan"),
            "restarts": int(self.restarts.sum()),
            # a last run longer than the limit in force when it started (a second of rounding allowed)
            "past_limit": int(((self.end - self.start)[done] > self.time_limit[done] + 1.0).sum()),
        }
