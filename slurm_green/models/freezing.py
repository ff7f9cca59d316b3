"""Effective progress of a job training with a frozen prefix of layers (IceFrog's term).

    effective_rate(f) = throughput(f) x penalty(f)

``f`` is the frozen share of the network's *blocks* (its stages or layer groups, units of
comparable compute), frozen from the front. Freezing a prefix skips its backward pass
(autograd stops at the first trainable layer), so a step's time falls by the frozen
blocks' share of the backward work, not by their share of the parameters: on the H100
(``perf_energy/h100/freeze_sweep.csv``) resnet50 with its stem, layer1 and layer2 frozen
(3 of 5 blocks, 5.7 % of the parameters) ran 1.58x the steps/s at 0.62 of the energy
per step. Throughput follows

    throughput(f) = throughput(0) / (1 - skip x f)

with ``skip`` the share of a step's time freezing can remove (the backward pass's, about
0.55-0.58 measured), fitted per workload by least squares through the origin on
``1 - steps(0)/steps(f) = skip x f``; board power follows ``1 - power_drop x f``
(``power_drop`` clipped at 0: power falling with freezing is never assumed without data).

**Frozen penalty** on statistical progress: ``penalty(f) = 1 - DEFAULT_PENALTY x f``.
It is a choice, not a fit: no accuracy-versus-freezing measurement is at hand. With 0.5,
the measured speedups at 60-75 % of the blocks frozen (1.58x, 1.78x) count as about 1.1x
effective progress, below the smallest time-to-accuracy gain Egeria reports for freezing
converged layers (19 %, Wang et al., EuroSys 2023), so the model never promises more than
the literature shows. Measurements from the training helper are to replace it.

**On several GPUs** freezing shortens a step's compute, not its gradient synchronisation:
the frozen front blocks hold few of the parameters (resnet50's first three of five: 5.7 %),
so the all-reduce is about as long as before. With ``c`` the compute share of a step at a
configuration (its throughput over ``gpus`` times one GPU's at the same cap: what the
scaling model leaves after synchronisation), the speedup there is
``1 / (1 - skip x f x c)``; at one GPU ``c = 1`` and it is the measured one. So a frozen
job gains less from each added GPU than it did unfrozen: IceFrog's case for moving GPUs
from freezing jobs to others (``policy/running.py``).

**Unknown job types** (no freezing sweep of their family) get the smallest fitted
``skip`` and no power drop: of the measured workloads, the one that gains least.
"""

from __future__ import annotations

from collections.abc import Sequence

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from slurm_green.core.models import Config, JobModel
from slurm_green.models.names import FAMILIES, normalise

#: Frozen-penalty slope (see the module docstring: a conservative choice, not a fit).
DEFAULT_PENALTY = 0.5

#: The freezing sweep's workload standing for each job family (names.FAMILIES' canonical prefixes).
FAMILY_WORKLOAD = {"ResNet-50": "resnet50", "imagenet": "resnet50",
                   "Transformer": "transformer", "bert": "transformer", "zeus:bert_base_uncased": "transformer"}


@dataclass(frozen=True, slots=True)
class FreezeParams:
    """One workload's response to freezing: ``skip`` (share of step time removable) and
    ``power_drop`` (board power's fall per unit of frozen share), both per unit of ``f``."""

    skip: float
    power_drop: float = 0.0

    def speedup(self, frozen: float, compute_share: float = 1.0) -> float:
        """Steps/s at frozen share ``frozen`` over steps/s with nothing frozen, where compute
        is ``compute_share`` of a step (1: one GPU, nothing to synchronise)."""
        return 1.0 / (1.0 - self.skip * _share(frozen) * compute_share)

    def energy_ratio(self, frozen: float) -> float:
        """Energy per step at ``frozen`` over energy per step with nothing frozen."""
        return (1.0 - self.power_drop * _share(frozen)) / self.speedup(frozen)


#: Fitted on perf_energy/h100/freeze_sweep.csv by ``fit`` (tests check a refit reproduces them).
FITTED: dict[str, FreezeParams] = {
    "resnet50": FreezeParams(skip=0.5803, power_drop=0.0469),
    "transformer": FreezeParams(skip=0.5816, power_drop=0.0118),
}


def _share(frozen: float) -> float:
    if not (math.isfinite(frozen) and 0.0 <= frozen <= 1.0):
        raise ValueError(f"frozen share {frozen!r}: expected a fraction in [0, 1]")
    return frozen


def default_params(fitted: dict[str, FreezeParams]) -> FreezeParams:
    """What an unknown job type gets: the smallest fitted ``skip``, no power drop."""
    return FreezeParams(skip=min(p.skip for p in fitted.values()), power_drop=0.0)


def workload_for(job_type: str) -> str | None:
    """The freezing sweep's workload of ``job_type``'s family, or None."""
    joined = normalise(job_type)
    for keyword in sorted(FAMILIES, key=len, reverse=True):
        if len(keyword) > 2 and keyword in joined:  # "lm" would match inside other words
            return FAMILY_WORKLOAD.get(FAMILIES[keyword][0])
    return None


def params_for(job_type: str, fitted: dict[str, FreezeParams] = FITTED) -> FreezeParams:
    workload = workload_for(job_type)
    return fitted[workload] if workload in fitted else default_params(fitted)


def penalty(frozen: float, slope: float = DEFAULT_PENALTY) -> float:
    """Statistical progress per sample at frozen share ``frozen``, relative to none frozen."""
    return 1.0 - slope * _share(frozen)


def compute_share(model: JobModel, config: Config) -> float:
    """The share of a step at ``config`` that is compute, not synchronisation: its throughput
    over ``config.gpus`` single GPUs' at the same cap (1 on one GPU)."""
    one = model.throughput(Config(1, 1, config.cap_fraction))
    if config.gpus <= 1 or one <= 0:
        return 1.0
    return min(1.0, max(0.0, model.throughput(config) / (config.gpus * one)))


def frozen_throughput(model: JobModel, config: Config, frozen: float,
                      fitted: dict[str, FreezeParams] = FITTED) -> float:
    """Units per second (samples, steps: what the job's helper counts) of ``model``'s job at
    ``config`` with ``frozen`` of its blocks frozen: faster steps, before any penalty on what
    a step is worth."""
    base = model.throughput(config)
    if frozen == 0:
        return base
    return base * params_for(model.job_type, fitted).speedup(frozen, compute_share(model, config))


def effective_rate(model: JobModel, config: Config, frozen: float, slope: float = DEFAULT_PENALTY,
                   fitted: dict[str, FreezeParams] = FITTED) -> float:
    """Statistical progress per second of ``model``'s job at ``config`` with ``frozen`` of its
    blocks frozen, in the model's unfrozen throughput units (equal to it at ``frozen = 0``)."""
    if frozen == 0:
        return model.throughput(config)
    return frozen_throughput(model, config, frozen, fitted) * penalty(frozen, slope)


def frozen_power_w(model: JobModel, config: Config, frozen: float,
                   fitted: dict[str, FreezeParams] = FITTED) -> float:
    """Board power of ``model``'s job at ``config`` with ``frozen`` of its blocks frozen."""
    if frozen == 0:
        return model.power_w(config)
    return model.power_w(config) * (1.0 - params_for(model.job_type, fitted).power_drop * _share(frozen))


# ---- fitting (from the shared data; never at run time) ----

@dataclass(frozen=True, slots=True)
class FreezeRow:
    workload: str
    frozen: float  # blocks frozen / blocks
    param_share: float
    steps_per_s: float
    power_w: float
    j_per_step: float


def read_sweep(perf: Path) -> list[FreezeRow]:
    """The freezing sweep's rows (``perf_energy/h100/freeze_sweep.csv``), in file order."""
    frame = pd.read_csv(perf / "h100" / "freeze_sweep.csv")
    rows = []
    for r in frame.itertuples():
        done, blocks = str(r.frozen).split("/")
        rows.append(FreezeRow(str(r.workload), int(done) / int(blocks), float(r.frozen_param_share),
                              float(r.steps_per_s), float(r.avg_power_w), float(r.j_per_step)))
    return rows


def fit_rows(rows: list[FreezeRow], share: str = "frozen") -> FreezeParams:
    """Fit one workload; ``rows`` must hold its unfrozen reference row (``frozen == 0``).

    ``share`` names the row attribute taken as ``f`` (``param_share``: the naive alternative)."""
    ref = next(r for r in rows if r.frozen == 0)
    points = [(getattr(r, share), r) for r in rows if r is not ref]
    sxx = sum(x * x for x, _ in points)
    if sxx == 0:
        return FreezeParams(skip=0.0)
    skip = sum(x * (1.0 - ref.steps_per_s / r.steps_per_s) for x, r in points) / sxx
    drop = sum(x * (1.0 - r.power_w / ref.power_w) for x, r in points) / sxx
    return FreezeParams(skip=min(max(skip, 0.0), 0.95), power_drop=max(drop, 0.0))


def fit(perf: Path) -> dict[str, FreezeParams]:
    """Each swept workload's parameters, rounded as ``FITTED`` keeps them."""
    by_workload: dict[str, list[FreezeRow]] = {}
    for row in read_sweep(perf):
        by_workload.setdefault(row.workload, []).append(row)
    out = {}
    for workload, rows in sorted(by_workload.items()):
        p = fit_rows(rows)
        out[workload] = FreezeParams(skip=round(p.skip, 4), power_drop=round(p.power_drop, 4))
    return out


# ---- error on rows held back from the fit ----

@dataclass(frozen=True, slots=True)
class FreezeHoldout:
    """MAPEs (fractions) of steps/s and J/step on held-back rows. Naive: freezing changes
    nothing; ``param_share``: the same model with the frozen share of parameters as ``f``."""

    scheme: str
    rows: int
    steps_mape: float
    steps_naive_mape: float
    steps_param_share_mape: float | None
    energy_mape: float
    energy_naive_mape: float


def holdout(perf: Path) -> list[FreezeHoldout]:
    """Leave one frozen row out (its workload refitted without it), and leave one workload
    out (predicted by the unknown-type default of the other workloads' fits)."""
    by_workload: dict[str, list[FreezeRow]] = {}
    for row in read_sweep(perf):
        by_workload.setdefault(row.workload, []).append(row)
    row_cases, type_cases = [], []
    for workload, rows in by_workload.items():
        ref = next(r for r in rows if r.frozen == 0)
        others = {w: fit_rows(rs) for w, rs in by_workload.items() if w != workload}
        for held in rows:
            if held is ref:
                continue
            kept = [r for r in rows if r is not held]
            row_cases.append((ref, held, fit_rows(kept), fit_rows(kept, "param_share")))
            type_cases.append((ref, held, default_params(others), None))
    return [_score("h100, one row left out", row_cases),
            _score("h100, one workload left out", type_cases)]


def _score(scheme: str,
           cases: Sequence[tuple[FreezeRow, FreezeRow, FreezeParams, FreezeParams | None]]) -> FreezeHoldout:
    steps, naive, by_params, energy, energy_naive = [], [], [], [], []
    for ref, held, params, param_share_fit in cases:
        steps.append(abs(ref.steps_per_s * params.speedup(held.frozen) / held.steps_per_s - 1))
        naive.append(abs(ref.steps_per_s / held.steps_per_s - 1))
        if param_share_fit is not None:
            by_params.append(abs(ref.steps_per_s * param_share_fit.speedup(held.param_share) / held.steps_per_s - 1))
        energy.append(abs(ref.j_per_step * params.energy_ratio(held.frozen) / held.j_per_step - 1))
        energy_naive.append(abs(ref.j_per_step / held.j_per_step - 1))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return FreezeHoldout(scheme, len(cases), mean(steps), mean(naive), mean(by_params) if by_params else None,
                         mean(energy), mean(energy_naive))
