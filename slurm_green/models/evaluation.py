"""How well the fitted models predict rows they were not fitted on, and what the
profiles say about energy-optimal caps and clocks.

Hold-out schemes (each row is predicted by a fit that never saw it):

* Zeus caps: leave one power limit out at a time (all networks and batches at once;
  the GPU constants are refitted too). The highest limit is never held out: it is
  the reference a job's own baseline is measured at.
* H100 caps: every 5th cap of the sweep from the top (500 W and 250 W) held back
  from the fit of every workload at once, constants refitted.
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
from slurm_green.core.models import Config, energy_per_work_j
from slurm_green.models.power_cap import CapParams
from slurm_green.models.registry import FittedRegistry
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
    groups = profiles.zeus_summary(perf, gpu)
    limits = sorted({round(r.cap_fraction, 6) for rows in groups.values() for r in rows[:-1]})
    return _cap_holdout(f"zeus:{gpu}", gpu, profiles.ZEUS_MAX_LIMIT_W[gpu], groups, [{c} for c in limits])


#: The H100 rows held back from the fit: every 5th cap counting down from the top (500 W and 250 W).
H100_HELD_EVERY = 5


def h100_held_caps(perf: Path) -> set[float]:
    """Cap fractions of the H100 sweep held back: every ``H100_HELD_EVERY``-th from the top."""
    caps = sorted({round(r.cap_fraction, 6) for rows in profiles.h100_sweep(perf).values() for r in rows}, reverse=True)
    return set(caps[H100_HELD_EVERY - 1::H100_HELD_EVERY])


def h100_holdout(perf: Path) -> list[HoldoutError]:
    """The H100 cap sweep with every 5th cap held back from the fit (all workloads at once)."""
    sweep = {(w, 0): rows for w, rows in profiles.h100_sweep(perf).items()}
    return _cap_holdout("h100", "h100", profiles.h100_board_w(perf)[1], sweep, [h100_held_caps(perf)],
                        profiles.h100_idle_w(perf))


def _cap_holdout(source: str, gpu: str, tdp: float, groups: dict[tuple[str, int], list[profiles.CapRow]],
                 held_sets: list[set[float]], idle_w: float | None = None) -> list[HoldoutError]:
    """For each set of held cap fractions: refit the GPU's constants and each job's curve on
    the other rows, predict the held rows; one result per network/workload."""
    errs: dict[str, dict[str, list[float]]] = {}
    for held in held_sets:
        train = {k: [r for r in rows if round(r.cap_fraction, 6) not in held] for k, rows in groups.items()}
        gpu_params = power_cap.fit_gpu(gpu, tdp, train, idle_w)
        for key, rows in groups.items():
            test = [r for r in rows if round(r.cap_fraction, 6) in held]
            if not test:
                continue
            cap = power_cap.fit_job(train[key], gpu_params)
            ref = train[key][-1].time_s
            e = errs.setdefault(key[0], {"t": [], "tn": [], "p": [], "pn": []})
            e["t"] += _ape([1 / (ref * power_cap.slowdown(gpu_params, cap, r.cap_fraction)) for r in test],
                           [1 / r.time_s for r in test])
            e["tn"] += _ape([1 / ref for _ in test], [1 / r.time_s for r in test])
            e["p"] += _ape([power_cap.busy_power_w(gpu_params, cap, r.cap_fraction) for r in test],
                           [r.power_w for r in test])
            e["pn"] += _ape([r.cap_fraction * tdp for r in test], [r.power_w for r in test])
    return [
        HoldoutError(source, net, len(e["t"]), _mean(e["t"]), _mean(e["tn"]), _mean(e["p"]), _mean(e["pn"]))
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
    return results + h100_holdout(perf)


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


def swept(perf: Path) -> dict[str, tuple[float, dict[str, list[profiles.CapRow]], float | None]]:
    """Every cap sweep: GPU -> (board maximum W, {job: rows by cap}, measured idle W or None)."""
    out: dict[str, tuple[float, dict[str, list[profiles.CapRow]], float | None]] = {
        gpu: (tdp, {f"{net} bs{bs}": rows for (net, bs), rows in profiles.zeus_summary(perf, gpu).items()}, None)
        for gpu, tdp in profiles.ZEUS_MAX_LIMIT_W.items()
    }
    out["h100"] = (profiles.h100_board_w(perf)[1], profiles.h100_sweep(perf), profiles.h100_idle_w(perf))
    return out


def energy_optimal_caps(perf: Path) -> list[OptimalCap]:
    """Per swept (GPU, job): the measured power limit with least energy per unit of work."""
    out = []
    for gpu, (tdp, groups, _) in swept(perf).items():
        for job, rows in groups.items():
            energy = [r.time_s * r.power_w for r in rows]
            best = int(np.argmin(energy))
            bound = rows[0].power_w < CAP_BOUND_POWER_DROP * rows[-1].power_w
            out.append(OptimalCap(gpu, job, rows[best].cap_fraction * tdp,
                                  1.0 - energy[best] / energy[-1], rows[best].time_s / rows[-1].time_s - 1.0, bound))
    return out


def model_optimal_caps(perf: Path) -> list[OptimalCap]:
    """The same question answered by the fitted model on a fine cap grid (no argmin noise)."""
    out = []
    for gpu, (tdp, groups, idle_w) in swept(perf).items():
        gpu_params = power_cap.fit_gpu(gpu, tdp, groups, idle_w)
        grid = np.linspace(gpu_params.cap_min, 1.0, 61)
        for job, rows in groups.items():
            cap: CapParams = power_cap.fit_job(rows, gpu_params)
            slow = np.array([power_cap.slowdown(gpu_params, cap, c) for c in grid])
            energy = slow * np.array([power_cap.busy_power_w(gpu_params, cap, c) for c in grid])
            best = int(np.argmin(np.round(energy, 9)[::-1]))  # among ties, the highest cap
            best = len(grid) - 1 - best
            out.append(OptimalCap(gpu, job, float(grid[best] * tdp),
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


@dataclass(frozen=True, slots=True)
class TypeOptimum:
    """A GPU type's energy-optimal cap in a registry: medians over its job types, one GPU each."""

    gpu: str
    board_min_w: float
    board_max_w: float
    cap_fraction: float
    energy_saved: float
    time_added: float
    jobs: int
    assumed: bool


def type_optima(registry: FittedRegistry, gpus: Iterable[str] | None = None) -> list[TypeOptimum]:
    """Per GPU type: the energy-optimal cap of each job type over the type's allowed caps (down
    to its board's minimum), against full power; the medians say where the type's caps pay.
    By default every type the registry plans for, the unprofiled ones its nodes reported too."""
    out = []
    for gpu in gpus if gpus is not None else registry.seen_gpu_types:
        caps, saved, added = [], [], []
        for job in registry.job_types:
            model, cap = registry.for_job(job, gpu), registry.energy_optimal_cap(job, gpu)
            full, low = Config(1, 1, 1.0), Config(1, 1, cap)
            caps.append(cap)
            saved.append(1.0 - energy_per_work_j(model, low) / energy_per_work_j(model, full))
            added.append(model.throughput(full) / model.throughput(low) - 1.0)
        params, note = registry.type_params(gpu)
        board = registry.board(gpu)
        lowest_w = board.min_w if board is not None else params.gpu.cap_min * params.gpu.tdp_w
        out.append(TypeOptimum(registry.gpu_type(gpu), lowest_w, params.gpu.tdp_w,
                               float(np.median(caps)), float(np.median(saved)), float(np.median(added)),
                               len(caps), bool(note)))
    return out
