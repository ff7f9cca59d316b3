"""How well the co-location load model predicts pairs it was not fitted on.

The pair tables are measurements, so their own error is run-to-run noise; what a
policy risks is the *load model*, which predicts the pairs no table covers from each
job's power alone (telemetry's proxy for how GPU-heavy a job is). Two held-back schemes:

* H100, per mechanism: leave one measured pair out, refit the load model on the other
  nine, predict both jobs' slowdowns and the pair's board power from the two jobs'
  measured power alone.
* Gavel's GPUs (V100, P100, K80): the load model fitted on the H100 (time-slicing), never
  on Gavel, predicts Gavel's pairs from each type's modelled power on that GPU (Gavel
  measured no power, so the proxy is itself a model here).

Each comes with a naive baseline: the median slowdown of the other pairs for every job,
and the heavier job's power alone for the pair. ``optimistic`` is the share of
predictions more than 5 % below the measured slowdown; ``wrongly_shared`` the pairs the
model puts within EaCO's default bound (1.25) whose measured slowdown is beyond it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from slurm_green.models import colocation, profiles
from slurm_green.core.models import Config
from slurm_green.models.fit import fit_load_model
from slurm_green.models.registry import FittedRegistry

BOUND = 1.25


@dataclass(frozen=True, slots=True)
class ColocationError:
    source: str
    pairs: int
    slowdown_mape: float
    slowdown_naive_mape: float
    optimistic: float
    wrongly_shared: int
    power_mape: float | None = None
    power_naive_mape: float | None = None


def _error(source: str, predicted: np.ndarray, measured: np.ndarray, naive: np.ndarray,
           power: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> ColocationError:
    """``predicted``/``measured``/``naive``: [pairs, 2] slowdowns; ``power``: predicted, measured, naive W."""
    pred_pair, meas_pair = predicted.max(axis=1), measured.max(axis=1)
    power_err = (None, None) if power is None else (
        float(np.mean(np.abs(power[0] / power[1] - 1.0))), float(np.mean(np.abs(power[2] / power[1] - 1.0))))
    return ColocationError(
        source, len(measured), float(np.mean(np.abs(predicted / measured - 1.0))),
        float(np.mean(np.abs(naive / measured - 1.0))), float(np.mean(predicted < 0.95 * measured)),
        int(np.sum((pred_pair <= BOUND) & (meas_pair > BOUND))), *power_err)


def h100_holdout(perf: Path, registry: FittedRegistry, mechanism: str) -> ColocationError:
    rows = profiles.h100_pairs(perf, mechanism)
    gpu = registry.type_params("h100")[0].gpu
    predicted, measured, naive, power = [], [], [], []
    for held in rows:
        load = fit_load_model(rows, gpu, exclude=(held.a, held.b))
        h = colocation.heaviness(np.array([held.power_a_w, held.power_b_w]), gpu.idle_w, gpu.tdp_w)
        slow = load.slowdown(h[::-1])
        truth = np.maximum([held.alone_a / held.shared_a, held.alone_b / held.shared_b], 1.0)
        others = [max(r.alone_a / r.shared_a, 1.0) for r in rows if r is not held] + \
                 [max(r.alone_b / r.shared_b, 1.0) for r in rows if r is not held]
        predicted.append(slow)
        measured.append(truth)
        naive.append([np.median(others)] * 2)
        power.append((float(colocation.pair_power_w(held.power_a_w, held.power_b_w, slow[0], slow[1], gpu.idle_w,
                                                    gpu.tdp_w, load.power_scale)),
                      held.pair_w, max(held.power_a_w, held.power_b_w)))
    p = np.array(power)
    return _error(f"h100 {mechanism}, pair left out", np.array(predicted), np.array(measured),
                  np.array(naive), (p[:, 0], p[:, 1], p[:, 2]))


def gavel_transfer(registry: FittedRegistry, gpu: str) -> ColocationError:
    """Gavel's pairs on ``gpu`` from the H100's time-slicing load model and modelled power."""
    table = registry.params.colocation[gpu]
    board = registry.type_params(gpu)[0].gpu
    load = registry.params.colocation_load["timeslice"]
    power = {t: registry.for_job(t, gpu).power_w(Config(1)) for pair in table for t in pair}
    finite = [(a, b, s) for (a, b), s in table.items() if all(map(math.isfinite, s))]
    h = {t: float(colocation.heaviness(p, board.idle_w, board.tdp_w)) for t, p in power.items()}
    predicted = np.array([[load.slowdown(h[b]), load.slowdown(h[a])] for a, b, _ in finite], dtype=float)
    measured = np.maximum(np.array([s for _, _, s in finite]), 1.0)
    naive = np.full_like(measured, float(np.median(measured)))
    return _error(f"{gpu} Gavel, H100 fit", predicted, measured, naive)


def colocation_holdouts(perf: Path, registry: FittedRegistry) -> list[ColocationError]:
    return [*(h100_holdout(perf, registry, m) for m in colocation.MECHANISMS),
            *(gavel_transfer(registry, g) for g in profiles.GAVEL_GPUS)]
