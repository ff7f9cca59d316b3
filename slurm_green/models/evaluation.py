"""How well the fitted models predict rows they were not fitted on, and what the
profiles say about energy-optimal caps and clocks.

Hold-out schemes (each row is predicted by a fit that never saw it):

* Zeus caps: leave one power limit out at a time (all networks and batches at once;
  the GPU constants are refitted too). The highest limit is never held out: it is
  the reference a job's own baseline is measured at.
* Gavel scaling: per job type, leave one GPU count (2, 4 or 8) out, both placements.
* Pollux scaling: fit on placements.csv (<= 16 GPUs, <= 4 nodes), predict
  scalability.csv (6-64 GPUs over 6-16 nodes): extrapolation in size and spread.

Each error comes with a naive baseline (linear scaling; cap-oblivious throughput and
power = cap x TDP) so that a number can be judged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from slurm_green.models import power_cap, profiles
from slurm_green.models.power_cap import CapParams
from slurm_green.models.scaling import fit_scaling


@dataclass(frozen=True, slots=True)
class HoldoutError:
    """MAPEs (fractions) on held-out rows; ``None`` where the source has no such column."""

    source: str
    model: str
    rows: int
    throughput_mape: float
    throughput_naive_mape: float
    power_mape: float | None = None
    power_naive_mape: float | None = None


def _ape(pred: Iterable[float], obs: Iterable[float]) -> list[float]:
    return [abs(p / o - 1.0) for p, o in zip(pred, obs, strict=True)]


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def cap_holdout(perf: Path, gpu: str) -> list[HoldoutError]:
    """Leave-one-power-limit-out on the Zeus summary of ``gpu``; one result per network."""
    tdp = profiles.ZEUS_MAX_LIMIT_W[gpu]
    groups = profiles.zeus_summary(perf, gpu)
    limits = sorted({round(r.cap_fraction, 6) for rows in groups.values() for r in rows[:-1]})
    errs: dict[str, dict[str, list[float]]] = {}
    for held in limits:
        train = {k: [r for r in rows if round(r.cap_fraction, 6) != held] for k, rows in groups.items()}
        gpu_params = power_cap.fit_gpu(gpu, tdp, train)
        for (net, _), rows in groups.items():
            test = [r for r in rows if round(r.cap_fraction, 6) == held]
            if not test:
                continue
            cap = power_cap.fit_job(train[(net, _)], gpu_params)
            ref = rows[-1].time_s
            e = errs.setdefault(net, {"t": [], "tn": [], "p": [], "pn": []})
            e["t"] += _ape([1 / (ref * power_cap.slowdown(gpu_params, cap, r.cap_fraction)) for r in test],
                           [1 / r.time_s for r in test])
            e["tn"] += _ape([1 / ref for _ in test], [1 / r.time_s for r in test])
            e["p"] += _ape([power_cap.busy_power_w(gpu_params, cap, r.cap_fraction) for r in test],
                           [r.power_w for r in test])
            e["pn"] += _ape([r.cap_fraction * tdp for r in test], [r.power_w for r in test])
    return [
        HoldoutError(f"zeus:{gpu}", net, len(e["t"]), _mean(e["t"]), _mean(e["tn"]), _mean(e["p"]), _mean(e["pn"]))
        for net, e in sorted(errs.items())
    ]


def gavel_holdout(perf: Path, gpu: str = "v100") -> list[HoldoutError]:
    """Leave-one-GPU-count-out per Gavel type with multi-GPU rows."""
    out = []
    for job in profiles.gavel_job_types(perf):
        rows = profiles.gavel_scaling_rows(perf, gpu, job)
        base = next((r.throughput for r in rows if r.gpus == 1), None)
        counts = sorted({r.gpus for r in rows if r.gpus > 1})
        if base is None or len(counts) < 2:
            continue
        ape, naive = [], []
        for held in counts:
            params = fit_scaling([r for r in rows if r.gpus != held], base)
            test = [r for r in rows if r.gpus == held]
            ape += _ape([base * params.speedup(r.gpus, r.nodes) for r in test], [r.throughput for r in test])
            naive += _ape([base * r.gpus for r in test], [r.throughput for r in test])
        out.append(HoldoutError(f"gavel:{gpu}", job, len(ape), _mean(ape), _mean(naive)))
    return out


def pollux_holdout(perf: Path) -> list[HoldoutError]:
    """Fit on placements, predict the larger, more spread scalability runs."""
    out = []
    for app in profiles.POLLUX_APPS:
        train = profiles.pollux_scaling_rows(perf, app, "placements")
        test = profiles.pollux_scaling_rows(perf, app, "scalability")
        base = next(r.throughput for r in train if r.gpus == 1)
        params = fit_scaling(train, base)
        ape = _ape([base * params.speedup(r.gpus, r.nodes) for r in test], [r.throughput for r in test])
        naive = _ape([base * r.gpus for r in test], [r.throughput for r in test])
        out.append(HoldoutError("pollux:t4", app, len(ape), _mean(ape), _mean(naive)))
    return out


def all_holdouts(perf: Path) -> list[HoldoutError]:
    results = gavel_holdout(perf) + pollux_holdout(perf)
    for gpu in profiles.ZEUS_MAX_LIMIT_W:
        results += cap_holdout(perf, gpu)
    return results


def pooled(results: list[HoldoutError], prefix: str) -> HoldoutError:
    """Row-weighted mean over the results whose source starts with ``prefix``."""
    chosen = [r for r in results if r.source.startswith(prefix)]
    w = np.array([r.rows for r in chosen], dtype=float)

    def avg(values: list[float | None]) -> float | None:
        if any(v is None for v in values):
            return None
        return float(np.average(np.array(values, dtype=float), weights=w))

    return HoldoutError(
        prefix, "all", int(w.sum()), avg([r.throughput_mape for r in chosen]) or 0.0,
        avg([r.throughput_naive_mape for r in chosen]) or 0.0,
        avg([r.power_mape for r in chosen]), avg([r.power_naive_mape for r in chosen]),
    )


@dataclass(frozen=True, slots=True)
class OptimalCap:
    """Energy-optimal setting of one profiled job versus the highest setting."""

    gpu: str
    job: str
    best_setting: float
    energy_saved: float
    time_added: float
    cap_bound: bool = True


# A sweep is "cap-bound" when its power at the lowest limit is below this share of its
# power at the highest: the cap actually changed what the GPU did. In the other sweeps
# (small models, input-bound) any "saving" is measurement noise picked by the argmin.
CAP_BOUND_POWER_DROP = 0.9


def energy_optimal_caps(perf: Path) -> list[OptimalCap]:
    """Per Zeus (GPU, network, batch): the measured power limit with least energy per epoch."""
    out = []
    for gpu, tdp in profiles.ZEUS_MAX_LIMIT_W.items():
        for (net, bs), rows in profiles.zeus_summary(perf, gpu).items():
            energy = [r.time_s * r.power_w for r in rows]
            best = int(np.argmin(energy))
            bound = rows[0].power_w < CAP_BOUND_POWER_DROP * rows[-1].power_w
            out.append(OptimalCap(gpu, f"{net} bs{bs}", rows[best].cap_fraction * tdp,
                                  1.0 - energy[best] / energy[-1], rows[best].time_s / rows[-1].time_s - 1.0, bound))
    return out


def model_optimal_caps(perf: Path) -> list[OptimalCap]:
    """The same question answered by the fitted model on a fine cap grid (no argmin noise)."""
    out = []
    for gpu, tdp in profiles.ZEUS_MAX_LIMIT_W.items():
        groups = profiles.zeus_summary(perf, gpu)
        gpu_params = power_cap.fit_gpu(gpu, tdp, groups)
        grid = np.linspace(gpu_params.cap_min, 1.0, 61)
        for (net, bs), rows in groups.items():
            cap: CapParams = power_cap.fit_job(rows, gpu_params)
            slow = np.array([power_cap.slowdown(gpu_params, cap, c) for c in grid])
            energy = slow * np.array([power_cap.busy_power_w(gpu_params, cap, c) for c in grid])
            best = int(np.argmin(np.round(energy, 9)[::-1]))  # among ties, the highest cap
            best = len(grid) - 1 - best
            out.append(OptimalCap(gpu, f"{net} bs{bs}", float(grid[best] * tdp),
                                  1.0 - energy[best] / energy[-1], slow[best] / slow[-1] - 1.0,
                                  rows[0].power_w < CAP_BOUND_POWER_DROP * rows[-1].power_w))
    return out


def frequency_optimum(perf: Path) -> list[OptimalCap]:
    """Perseus: the SM clock with least energy per micro-batch (all stages), versus the top clock."""
    out = []
    for gpu, frame in profiles.perseus(perf).items():
        frame = frame.sort_values("frequency")
        best = int(np.argmin(frame["energy"].to_numpy()))
        e, t = frame["energy"].to_numpy(), frame["time"].to_numpy()
        out.append(OptimalCap(gpu, "gpt3-175b stages", float(frame["frequency"].iloc[best]),
                              1.0 - e[best] / e[-1], t[best] / t[-1] - 1.0))
    return out


def summarise_optima(optima: list[OptimalCap], only_cap_bound: bool = False) -> dict[str, float]:
    """Medians and means of energy saved and time added, optionally over cap-bound sweeps only."""
    chosen = [o for o in optima if o.cap_bound or not only_cap_bound]
    if not chosen:
        return {"jobs": 0, "of": len(optima)}
    return {
        "jobs": len(chosen),
        "of": len(optima),
        "median_energy_saved": float(np.median([o.energy_saved for o in chosen])),
        "median_time_added": float(np.median([o.time_added for o in chosen])),
        "mean_energy_saved": float(np.mean([o.energy_saved for o in chosen])),
        "mean_time_added": float(np.mean([o.time_added for o in chosen])),
    }
