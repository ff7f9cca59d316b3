"""Fit every job type's parameters from the profiles in ``perf_energy/``.

Sources per job type (the table is also in docs/models.md):

* Gavel types: single-GPU steps/s and scaling from Gavel on ``gpu`` (consolidated and
  unconsolidated); cap response from the Zeus sweep of the closest network and batch.
* Pollux apps: samples/s at the app's median local batch on T4 and scaling from the
  placement measurements; cap response from the Zeus sweep of the same model.
* ``zeus:<network>``: epochs/s at the network's median batch from the Zeus sweep;
  scaling borrowed from the Pollux app training the same model.

Types with no multi-GPU data (A3C, CycleGAN, Recommendation) or no matching Zeus sweep
get the conservative default's part they lack, never an optimistic one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from slurm_green.models import colocation, power_cap, profiles
from slurm_green.models.params import FittedParams, JobParams
from slurm_green.models.power_cap import CapParams, GpuPowerParams
from slurm_green.models.scaling import ScalingParams, fit_scaling

# Zeus network whose cap response stands in for a Gavel family / Pollux app (same or closest model).
GAVEL_CAP_PROXY = {
    "ResNet-50": "resnet50",
    "ResNet-18": "shufflenetv2",
    "Transformer": "bert_base_uncased",
    "LM": "deepspeech2",
    "Recommendation": "ncf",
}
POLLUX_CAP_PROXY = {
    "imagenet": "resnet50",
    "cifar10": "shufflenetv2",
    "bert": "bert_base_uncased",
    "deepspeech2": "deepspeech2",
    "ncf": "ncf",
}
ZEUS_SCALING_PROXY = {
    "resnet50": "imagenet",
    "shufflenetv2": "cifar10",
    "bert_base_uncased": "bert",
    "deepspeech2": "deepspeech2",
    "ncf": "ncf",
}
# Gavel type whose co-location pairs stand in for a Pollux app or Zeus network.
COLOCATION_PROXY = {
    "imagenet": "ResNet-50 (batch size 64)",
    "cifar10": "ResNet-18 (batch size 64)",
    "bert": "Transformer (batch size 64)",
    "deepspeech2": "LM (batch size 20)",
    "ncf": "Recommendation (batch size 2048)",
    "zeus:resnet50": "ResNet-50 (batch size 64)",
    "zeus:shufflenetv2": "ResNet-18 (batch size 64)",
    "zeus:bert_base_uncased": "Transformer (batch size 64)",
    "zeus:deepspeech2": "LM (batch size 20)",
    "zeus:ncf": "Recommendation (batch size 2048)",
}
# GPUs without a Zeus sweep borrow the V100 curve, scaled to their own board limit.
PROXY_TDP_W = {"k80": 150.0, "t4": 70.0}
DEFAULT_SCALING_QUANTILE = 0.75
CHECK_GRID = [(g, n) for g in (1, 2, 3, 4, 6, 8, 12, 16, 32, 64) for n in (1, 2, 4, 8, 16) if n <= g]


def proxy_gpu(name: str, v100: GpuPowerParams) -> GpuPowerParams:
    scale = PROXY_TDP_W[name] / v100.tdp_w
    return replace(v100, name=name, tdp_w=PROXY_TDP_W[name], idle_w=v100.idle_w * scale)


def fit_gpus(perf: Path) -> tuple[dict[str, GpuPowerParams], dict[str, dict[tuple[str, int], CapParams]]]:
    gpus, caps = {}, {}
    for name, tdp in profiles.ZEUS_MAX_LIMIT_W.items():
        groups = profiles.zeus_summary(perf, name)
        gpus[name] = power_cap.fit_gpu(name, tdp, groups)
        caps[name] = {key: power_cap.fit_job(rows, gpus[name]) for key, rows in groups.items()}
    for name in PROXY_TDP_W:
        gpus[name] = proxy_gpu(name, gpus["v100"])
    return gpus, caps


def median_cap(caps: dict[tuple[str, int], CapParams], network: str | None = None) -> CapParams:
    chosen = [c for (net, _), c in caps.items() if network is None or net == network]
    return CapParams(
        float(np.median([c.natural_power_fraction for c in chosen])), float(np.median([c.beta for c in chosen]))
    )


def nearest_cap(caps: dict[tuple[str, int], CapParams], network: str, batch: int) -> CapParams:
    sizes = [bs for net, bs in caps if net == network]
    return caps[(network, min(sizes, key=lambda s: (abs(s - batch), s)))]


def gavel_family(job_type: str) -> tuple[str, int | None]:
    if " (batch size " in job_type:
        family, rest = job_type.split(" (batch size ")
        return family, int(rest.rstrip(")"))
    return job_type, None


def conservative_scaling(known: list[ScalingParams]) -> ScalingParams:
    """Coefficient-wise high quantile, inflated until its speedup is at most the median known
    type's at every configuration of ``CHECK_GRID``: an unknown job is never assumed to scale
    better than a typical one."""
    q = np.quantile([[s.a, s.b, s.a_net, s.b_net] for s in known], DEFAULT_SCALING_QUANTILE, axis=0)
    cand = ScalingParams(*(float(v) for v in q))
    medians = {(g, n): float(np.median([s.speedup(g, n) for s in known])) for g, n in CHECK_GRID}
    for _ in range(100):
        if all(cand.speedup(g, n) <= medians[(g, n)] + 1e-9 for g, n in CHECK_GRID):
            return cand
        cand = ScalingParams(cand.a * 1.1 + 1e-3, cand.b * 1.1 + 1e-3, cand.a_net * 1.1 + 1e-3, cand.b_net * 1.1)
        cand = replace(cand, b=min(cand.b, (1 + cand.a) / 2))
    return cand


def fit_all(perf: Path, gavel_gpu: str = "v100") -> FittedParams:
    """Fit every type for a cluster of ``gavel_gpu`` (v100, p100 or k80) GPUs."""
    gpus, caps = fit_gpus(perf)
    zeus_gpu = gavel_gpu if gavel_gpu in caps else "v100"
    zcaps = caps[zeus_gpu]
    default_cap = median_cap(zcaps)
    jobs: dict[str, JobParams] = {}

    gavel = profiles.gavel(perf)
    for job_type in profiles.gavel_job_types(perf):
        base = float(gavel[gavel_gpu][(job_type, 1)]["null"])  # type: ignore[arg-type]
        rows = profiles.gavel_scaling_rows(perf, gavel_gpu, job_type)
        family, batch = gavel_family(job_type)
        net = GAVEL_CAP_PROXY.get(family)
        cap = nearest_cap(zcaps, net, batch or 0) if net else default_cap
        jobs[job_type] = JobParams(
            job_type, gpus[gavel_gpu].name, "steps", base, fit_scaling(rows, base), cap,
            f"gavel:{gavel_gpu}; cap from zeus:{zeus_gpu}:{net or 'median'}",
        )

    for app in profiles.POLLUX_APPS:
        rows = profiles.pollux_scaling_rows(perf, app, "placements")
        base = next(r.throughput for r in rows if r.gpus == 1)
        net = POLLUX_CAP_PROXY.get(app)
        cap = median_cap(zcaps, net) if net else default_cap
        jobs[app] = JobParams(
            app, "t4", "samples", base, fit_scaling(rows, base), cap,
            f"pollux:{app} (T4); cap from zeus:{zeus_gpu}:{net or 'median'}",
        )

    summary = profiles.zeus_summary(perf, zeus_gpu)
    for net, app in ZEUS_SCALING_PROXY.items():
        sizes = sorted(bs for n, bs in summary if n == net)
        batch = sizes[len(sizes) // 2]
        rows = summary[(net, batch)]
        jobs[f"zeus:{net}"] = JobParams(
            f"zeus:{net}", zeus_gpu, f"epochs@bs{batch}", 1.0 / rows[-1].time_s, jobs[app].scaling,
            zcaps[(net, batch)], f"zeus:{zeus_gpu}:{net} bs {batch}; scaling from pollux:{app}",
        )

    measured = [j.scaling for j in jobs.values() if j.scaling != ScalingParams() and not j.job_type.startswith("zeus:")]
    default_scaling = conservative_scaling(measured)
    for name, job in jobs.items():
        if job.scaling == ScalingParams():  # no multi-GPU measurement at all
            jobs[name] = replace(job, scaling=default_scaling, source=job.source + "; scaling: default")
    default = JobParams(
        "default", gpus[gavel_gpu].name, "work", 1.0, default_scaling, default_cap,
        f"default: q{int(DEFAULT_SCALING_QUANTILE * 100)} scaling of measured types, median zeus:{zeus_gpu} cap",
    )

    alone = {j: float(gavel[gavel_gpu][(j, 1)]["null"]) for j in profiles.gavel_job_types(perf)}  # type: ignore[arg-type]
    pairs = colocation.pair_slowdowns(alone, profiles.gavel_pairs(perf, gavel_gpu))
    return FittedParams(
        gpus=gpus, jobs=jobs, default=default, colocation=pairs,
        colocation_default=colocation.conservative_default(pairs),
        colocation_proxy=dict(COLOCATION_PROXY),
        meta={"gpu": gavel_gpu, "zeus_gpu": zeus_gpu, "data": str(perf)},
    )

