"""Fit every (job type, GPU type) from the profiles in ``perf_energy/`` (run on purpose only:
``slurm-green models fit --data DIR --out FILE``; a controller loads the result).

Each job type has a reference measurement on the V100 (the primary type) and, per GPU
type, a speed ratio and a cap response taken from the data that measured that GPU
(the table is also in docs/models.md):

* Speed, relative to the V100: P100 and K80 from Gavel's own measurements of each type;
  A40 from the Zeus sweeps of the same network and batch on both GPUs; A100 from the
  A40's times the Perseus A100/A40 ratio (GPT-3 stages at the top clock); H100 from
  the H100 sweep's workloads that are Gavel's models (ResNet-50, ResNet-18 on CIFAR,
  the LSTM LM), against Gavel's V100 steps/s at the same batch. Families the H100 run
  did not measure as Gavel's model (Transformer, Recommendation, A3C, CycleGAN) get
  the smallest measured H100 ratio: a new GPU is never credited more than measured.
* Cap response: Zeus sweeps on V100, A40, P100 (closest network and batch); the H100
  sweep for the H100 (the workload of the same family); K80 and A100 borrow the V100
  and A40 curves scaled to their boards.
* Scaling over GPUs and nodes: Gavel on each Gavel GPU, Pollux placements; other GPU
  types use the V100's (no multi-GPU measurement on them).
* Co-location: Gavel's pairs on its GPUs; the H100's time-slicing and MPS pairs (by
  family); the load model (slowdown and power from each job's power alone) from the H100 pairs.

Types with no multi-GPU data (A3C, CycleGAN, Recommendation) or no matching sweep get the
conservative default's part they lack, never an optimistic one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from slurm_green.models import colocation, power_cap, profiles
from slurm_green.models.colocation import LoadModel
from slurm_green.models.params import FittedParams, GpuTypeParams, JobParams
from slurm_green.models.power_cap import CapParams, GpuPowerParams
from slurm_green.models.scaling import ScalingParams, fit_scaling

PRIMARY = "v100"
GPU_TYPES = ("v100", "p100", "k80", "a40", "a100", "h100")
ZEUS_GPUS = tuple(profiles.ZEUS_MAX_LIMIT_W)
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
# Gavel type standing in for a Pollux app or Zeus network: co-location pairs and speed ratios.
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
# H100 sweep workload (h100/workloads.py) of each Gavel family: its cap response.
H100_WORKLOAD = {
    "ResNet-50": "resnet50",
    "ResNet-18": "resnet18",
    "Transformer": "transformer",
    "LM": "lstm_lm",
    "Recommendation": "recommendation",
}
# Families whose H100 workload is Gavel's own model, with the H100 run's batch: their steps/s compare.
H100_SAME_MODEL_BATCH = {"ResNet-50": 128, "ResNet-18": 256, "LM": 64}
# GPUs without a cap sweep: (curve borrowed from, board limit W). A100: Perseus measured the SXM (400 W).
PROXY_BOARD = {"k80": ("v100", 150.0), "a100": ("a40", 400.0)}
DEFAULT_SCALING_QUANTILE = 0.75
CHECK_GRID = [(g, n) for g in (1, 2, 3, 4, 6, 8, 12, 16, 32, 64) for n in (1, 2, 4, 8, 16) if n <= g]


def fit_gpus(perf: Path) -> tuple[dict[str, GpuPowerParams], dict[str, dict[tuple[str, int], CapParams]]]:
    """Per GPU type: board constants and each swept (network or workload, batch)'s cap response."""
    gpus, caps = {}, {}
    for name, tdp in profiles.ZEUS_MAX_LIMIT_W.items():
        groups = profiles.zeus_summary(perf, name)
        gpus[name] = power_cap.fit_gpu(name, tdp, groups)
        caps[name] = {key: power_cap.fit_job(rows, gpus[name]) for key, rows in groups.items()}
    sweep = {(workload, 0): rows for workload, rows in profiles.h100_sweep(perf).items()}
    gpus["h100"] = power_cap.fit_gpu("h100", profiles.h100_board_w(perf)[1], sweep, idle_w=profiles.h100_idle_w(perf))
    caps["h100"] = {key: power_cap.fit_job(rows, gpus["h100"]) for key, rows in sweep.items()}
    for name, (source, board_w) in PROXY_BOARD.items():
        gpus[name] = power_cap.scaled_to_board(gpus[source], name, board_w)
        caps[name] = caps[source]
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


class _Fit:
    """The data read once, and the per-job rules that turn it into one GPU type's parameters."""

    def __init__(self, perf: Path) -> None:
        self.perf = perf
        self.gpus, self.caps = fit_gpus(perf)
        self.gavel = profiles.gavel(perf)
        self.gavel_types = profiles.gavel_job_types(perf)
        self.zeus = {g: profiles.zeus_summary(perf, g) for g in ZEUS_GPUS}
        self.perseus = profiles.perseus_top_time_s(perf)
        self.h100_steps = profiles.h100_steps_per_s(perf)
        self.reference = self._reference_jobs()

    # --- which measured model a job type is --------------------------------------------
    @staticmethod
    def gavel_type(job: str) -> str | None:
        """The Gavel type of ``job`` itself, or the one standing in for it."""
        return COLOCATION_PROXY.get(job, job if " (batch size " in job or job in ("A3C", "CycleGAN") else None)

    def family(self, job: str) -> str | None:
        gavel_type = self.gavel_type(job)
        return gavel_family(gavel_type)[0] if gavel_type else None

    @staticmethod
    def zeus_network(job: str) -> str | None:
        if job.startswith("zeus:"):
            return job.removeprefix("zeus:")
        family = gavel_family(job)[0]
        return GAVEL_CAP_PROXY.get(family) or POLLUX_CAP_PROXY.get(job)

    # --- the V100 reference ---------------------------------------------------------------
    def _reference_jobs(self) -> dict[str, JobParams]:
        """Every type on the V100: Gavel steps/s, Pollux samples/s (measured on T4: the level
        is T4's, only ratios matter), Zeus epochs/s at the network's median batch."""
        jobs: dict[str, JobParams] = {}
        for job in self.gavel_types:
            base = float(self.gavel[PRIMARY][(job, 1)]["null"])
            rows = profiles.gavel_scaling_rows(self.perf, PRIMARY, job)
            jobs[job] = JobParams(job, PRIMARY, "steps", base, fit_scaling(rows, base), CapParams(1.0, 0.0),
                                  f"gavel:{PRIMARY}")
        for app in profiles.POLLUX_APPS:
            rows = profiles.pollux_scaling_rows(self.perf, app, "placements")
            base = next(r.throughput for r in rows if r.gpus == 1)
            jobs[app] = JobParams(app, PRIMARY, "samples", base, fit_scaling(rows, base), CapParams(1.0, 0.0),
                                  f"pollux:{app} (level measured on T4)")
        for net, app in ZEUS_SCALING_PROXY.items():
            sizes = sorted(bs for n, bs in self.zeus[PRIMARY] if n == net)
            batch = sizes[len(sizes) // 2]
            base = 1.0 / self.zeus[PRIMARY][(net, batch)][-1].time_s
            jobs[f"zeus:{net}"] = JobParams(f"zeus:{net}", PRIMARY, f"epochs@bs{batch}", base, jobs[app].scaling,
                                            CapParams(1.0, 0.0), f"zeus:{PRIMARY}:{net} bs {batch}; scaling from pollux:{app}")
        return jobs

    # --- speed of a job on a GPU type, relative to the V100 --------------------------------
    def speed(self, gpu: str, job: str) -> tuple[float, str]:
        if gpu == PRIMARY:
            return 1.0, ""
        if gpu in ZEUS_GPUS and job.startswith("zeus:"):
            return self._zeus_speed(gpu, job)
        if gpu in profiles.GAVEL_GPUS:
            return self._gavel_speed(gpu, self.gavel_type(job))
        if gpu in ZEUS_GPUS:
            return self._zeus_speed(gpu, job)
        if gpu == "a100":
            ratio, why = self._zeus_speed("a40", job)
            perseus = self.perseus["a40"] / self.perseus["a100_sxm"]
            return ratio * perseus, f"{why} x perseus a100/a40 {perseus:.2f}"
        if gpu == "h100":
            return self._h100_speed(job)
        raise ValueError(f"no speed data for {gpu}")

    def _gavel_speed(self, gpu: str, gavel_type: str | None) -> tuple[float, str]:
        def ratio(t: str) -> float:
            return float(self.gavel[gpu][(t, 1)]["null"]) / float(self.gavel[PRIMARY][(t, 1)]["null"])

        if gavel_type is not None:
            return ratio(gavel_type), f"gavel {gpu}/{PRIMARY} {gavel_type}"
        return float(np.median([ratio(t) for t in self.gavel_types])), f"gavel {gpu}/{PRIMARY} median"

    def _zeus_speed(self, gpu: str, job: str) -> tuple[float, str]:
        """Zeus times at the top limit of the same (network, batch) on both GPUs."""
        def ratios(net: str | None, batch: int | None = None) -> list[float]:
            return [rows[-1].time_s / self.zeus[gpu][key][-1].time_s for key, rows in self.zeus[PRIMARY].items()
                    if key in self.zeus[gpu] and (net is None or key[0] == net) and (batch is None or key[1] == batch)]

        net = self.zeus_network(job)
        if job.startswith("zeus:"):
            batch = int(self.reference[job].unit.removeprefix("epochs@bs"))
            same = ratios(net, batch)
            if same:
                return same[0], f"zeus {gpu}/{PRIMARY} {net} bs {batch}"
        if net and ratios(net):
            return float(np.median(ratios(net))), f"zeus {gpu}/{PRIMARY} {net} median"
        return float(np.median(ratios(None))), f"zeus {gpu}/{PRIMARY} median"

    def _h100_ratio(self, family: str) -> float:
        """H100 steps/s over Gavel's V100 steps/s of the same model, interpolated (log-log) to the H100 batch."""
        batch = H100_SAME_MODEL_BATCH[family]
        sizes = sorted(b for t in self.gavel_types if (b := gavel_family(t)[1]) and gavel_family(t)[0] == family)
        tput = [float(self.gavel[PRIMARY][(f"{family} (batch size {b})", 1)]["null"]) for b in sizes]
        v100 = float(np.exp(np.interp(np.log(batch), np.log(sizes), np.log(tput))))
        return self.h100_steps[H100_WORKLOAD[family]] / v100

    def _h100_speed(self, job: str) -> tuple[float, str]:
        family = self.family(job)
        if family in H100_SAME_MODEL_BATCH:
            return self._h100_ratio(family), f"h100 {H100_WORKLOAD[family]} / gavel {PRIMARY} {family}"
        lowest = min(H100_SAME_MODEL_BATCH, key=self._h100_ratio)
        return self._h100_ratio(lowest), f"h100: no same-model run, lowest measured ratio ({lowest})"

    # --- cap response of a job on a GPU type ------------------------------------------------
    def cap(self, gpu: str, job: str) -> tuple[CapParams, str]:
        caps = self.caps[gpu]
        if gpu == "h100":
            workload = H100_WORKLOAD.get(self.family(job) or "")
            return (caps[(workload, 0)], f"h100:{workload}") if workload else (median_cap(caps), "h100:median")
        source = PROXY_BOARD[gpu][0] if gpu in PROXY_BOARD else gpu
        net = self.zeus_network(job)
        if net is None:
            return median_cap(caps), f"zeus:{source}:median"
        if job.startswith("zeus:"):
            return nearest_cap(caps, net, int(self.reference[job].unit.removeprefix("epochs@bs"))), f"zeus:{source}:{net}"
        if job in POLLUX_CAP_PROXY:
            return median_cap(caps, net), f"zeus:{source}:{net}"
        return nearest_cap(caps, net, gavel_family(job)[1] or 0), f"zeus:{source}:{net}"

    # --- one GPU type --------------------------------------------------------------------
    def gpu_type(self, gpu: str) -> GpuTypeParams:
        jobs: dict[str, JobParams] = {}
        for name, ref in self.reference.items():
            ratio, why = self.speed(gpu, name)
            scaling, scaling_why = ref.scaling, ""
            if gpu in profiles.GAVEL_GPUS and gpu != PRIMARY and name in self.gavel_types:
                rows = profiles.gavel_scaling_rows(self.perf, gpu, name)
                scaling, scaling_why = fit_scaling(rows, ref.base_throughput * ratio), f"; scaling: gavel:{gpu}"
            cap, cap_why = self.cap(gpu, name)
            source = (ref.source + (f"; speed: {why} x{ratio:.3g}" if why else "") + scaling_why
                      + f"; cap from {cap_why}")
            jobs[name] = replace(ref, gpu=gpu, base_throughput=ref.base_throughput * ratio, scaling=scaling,
                                 cap=cap, source=source)
        measured = [j.scaling for n, j in jobs.items() if j.scaling != ScalingParams() and not n.startswith("zeus:")]
        default_scaling = conservative_scaling(measured)
        for name, job in jobs.items():
            if job.scaling == ScalingParams():  # no multi-GPU measurement at all
                jobs[name] = replace(job, scaling=default_scaling, source=job.source + "; scaling: default")
        default = JobParams(
            "default", gpu, "work", 1.0, default_scaling, median_cap(self.caps[gpu]),
            f"default: q{int(DEFAULT_SCALING_QUANTILE * 100)} scaling of measured types, median cap on {gpu}",
        )
        return GpuTypeParams(self.gpus[gpu], jobs, default)

    def colocation(self, gpu: str, mechanism: str = "timeslice") -> dict[tuple[str, str], tuple[float, float]]:
        """Gavel's pairs on its GPUs; on the H100 its pairs under ``mechanism``, each Gavel
        type standing for its family's workload (pairs of one family were not measured)."""
        if gpu == "h100":
            alone, shared = profiles.h100_colocation(self.perf, mechanism)
            pairs = colocation.pair_slowdowns(alone, shared)
            both = {**pairs, **{(b, a): (sb, sa) for (a, b), (sa, sb) in pairs.items()}}
            workload = {t: w for t in self.gavel_types if (w := H100_WORKLOAD.get(gavel_family(t)[0])) is not None}
            return {(a, b): both[(wa, wb)] for a, wa in workload.items() for b, wb in workload.items()
                    if (wa, wb) in both}
        alone = {j: float(self.gavel[gpu][(j, 1)]["null"]) for j in self.gavel_types}
        return colocation.pair_slowdowns(alone, profiles.gavel_pairs(self.perf, gpu))

    def load_model(self, mechanism: str, exclude: tuple[str, str] | None = None) -> LoadModel:
        """The load model fitted on the H100 pairs under ``mechanism`` (without the pair ``exclude``)."""
        return fit_load_model(profiles.h100_pairs(self.perf, mechanism), self.gpus["h100"], exclude)


def fit_load_model(rows: list[profiles.PairRow], gpu: GpuPowerParams,
                   exclude: tuple[str, str] | None = None) -> colocation.LoadModel:
    """Slowdown envelope and power scale from measured pairs (both jobs of each pair are points)."""
    rows = [r for r in rows if (r.a, r.b) != exclude]
    h_a = colocation.heaviness(np.array([r.power_a_w for r in rows]), gpu.idle_w, gpu.tdp_w)
    h_b = colocation.heaviness(np.array([r.power_b_w for r in rows]), gpu.idle_w, gpu.tdp_w)
    slow_a = np.array([r.alone_a / r.shared_a for r in rows])
    slow_b = np.array([r.alone_b / r.shared_b for r in rows])
    k, p = colocation.fit_load(np.concatenate([h_b, h_a]), np.concatenate([slow_a, slow_b]))
    scale = colocation.fit_power_scale(np.array([r.power_a_w for r in rows]), np.array([r.power_b_w for r in rows]),
                                       slow_a, slow_b, np.array([r.pair_w for r in rows]), gpu.idle_w)
    return colocation.LoadModel(k, p, scale)


def fit_all(perf: Path) -> FittedParams:
    """Fit every job type on every GPU type of ``GPU_TYPES`` from ``perf`` (a ``perf_energy`` folder)."""
    fit = _Fit(perf)
    return FittedParams(
        types={gpu: fit.gpu_type(gpu) for gpu in GPU_TYPES},
        primary=PRIMARY,
        colocation={gpu: fit.colocation(gpu) for gpu in (*profiles.GAVEL_GPUS, "h100")},
        colocation_mps={"h100": fit.colocation("h100", "mps")},
        colocation_load={m: fit.load_model(m) for m in colocation.MECHANISMS},
        colocation_proxy=dict(COLOCATION_PROXY),
        meta={"fitted_from": "perf_energy/ of PROVENANCE.md, section C", "data_sha256": profiles.data_sha256(perf)},
    )
