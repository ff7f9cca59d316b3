"""GPU types by name, board limits, and the conservative model of a GPU type nobody profiled.

Slurm names a node's GPUs by its gres type (``gpu:h100:8``), NVML by the board's
product name (``NVIDIA H100 80GB HBM3``); both map to one canonical type here. A type
without fitted parameters still gets a model, built from what its board reports
(NVML's min/max/default power limits) so that a policy never profits from a guess:

* speed: the primary type's, scaled down by the board's power when it is smaller
  (never up: an unmeasured GPU is not assumed faster than a measured one);
* a cap's effect: the whole response of the one fitted type on which caps save least
  (``weakest_cap_response``), put on this board: a measured GPU's behaviour, only the most
  pessimistic one. Taking the worst of each parameter apart instead (the highest
  sensitivity of one GPU with the highest draw of another) describes no GPU at all: on
  a real H200 it over-stated a cap's time cost by 1.8-2.1 uncapped step times (mean over
  the caps) and so kept 4.7 of the 21.3 % of energy a cap saves there
  (``benchmarks/unseen_board.py``, docs/models.md);
* caps: from the board's own minimum to its maximum.

A fitted type whose nodes report a board more than 5 % off the fitted one keeps its own
shape scaled to that board (``rescaled_type``), and its speed follows the first rule: scaled
down by the board's power when the board is smaller, never up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from slurm_green.models.params import GpuTypeParams, JobParams
from slurm_green.models.power_cap import CapParams, GpuPowerParams, busy_power_w, scaled_to_board, slowdown


@dataclass(frozen=True, slots=True)
class Board:
    """A board's power-limit range and factory default (W), as NVML reports them."""

    min_w: float
    max_w: float
    default_w: float

    def __post_init__(self) -> None:
        if not (0 < self.min_w <= self.default_w <= self.max_w):
            raise ValueError(f"board limits min {self.min_w!r} <= default {self.default_w!r} <= max "
                             f"{self.max_w!r} W, all positive: not a board")

    @property
    def min_fraction(self) -> float:
        return self.min_w / self.max_w


_VENDOR = {"nvidia", "tesla", "geforce", "quadro"}
_VARIANT = re.compile(r"^(\d+gb|pcie|sxm\d*|nvl|hbm\d*e?|mig)$")


def canonical_gpu(name: str | None, known: Iterable[str]) -> str:
    """``known`` type named by ``name`` (a gres type or an NVML product name), else the name's
    model words (vendor and memory/form-factor words dropped), so that the gres type and the
    NVML name of one unprofiled GPU agree: ``"NVIDIA H100 80GB HBM3"`` -> ``h100``,
    ``"Tesla V100-SXM2-16GB"`` -> ``v100``, ``"NVIDIA H200 141GB HBM3e"`` and ``"h200"`` ->
    ``h200``, ``"NVIDIA RTX A4000"`` and ``"rtx_a4000"`` -> ``rtxa4000`` (not ``a40``)."""
    tokens = [t for t in re.split(r"[^a-z0-9]+", (name or "").lower()) if t]
    for key in sorted(known, key=len, reverse=True):
        for token in tokens:
            if token == key or (token.startswith(key) and not token[len(key)].isdigit()):
                return key
    model = [t for t in tokens if t not in _VENDOR]
    cut = next((i for i, t in enumerate(model) if _VARIANT.match(t)), len(model))
    return "".join(model[:cut]) or "".join(tokens) or "unknown"


def board_of(gpu: GpuPowerParams) -> Board:
    """The board a fitted type was measured on: its lowest swept cap up to its TDP."""
    return Board(gpu.tdp_w * gpu.cap_min, gpu.tdp_w, gpu.tdp_w)


def weakest_cap_response(fitted: Mapping[str, GpuTypeParams], primary: GpuTypeParams, board: Board) -> str:
    """The fitted type on which caps save least when put on ``board`` (``least_energy_ratio``
    highest; the first by name among equals): whose response an unprofiled type borrows."""
    return min(sorted(fitted), key=lambda t: -least_energy_ratio(fitted[t], primary, board))


def conservative_type(name: str, board: Board, primary: GpuTypeParams, response: GpuTypeParams,
                      note: str) -> GpuTypeParams:
    """The model of ``name``, a GPU type without fitted parameters, from its ``board``: the
    ``primary`` type's jobs and speed (see module doc) with ``response``'s cap response."""
    speed = min(1.0, board.max_w / primary.gpu.tdp_w)
    gpu = scaled_to_board(response.gpu, name, board.max_w, board.min_w)

    def job(params: JobParams, cap: CapParams) -> JobParams:
        return replace(params, gpu=name, base_throughput=params.base_throughput * speed, cap=cap,
                       source=f"{params.source}; ASSUMED on {name}: {note}")

    return GpuTypeParams(gpu, {t: job(p, response.jobs.get(t, response.default).cap) for t, p in primary.jobs.items()},
                         job(primary.default, response.default.cap))


def rescaled_type(name: str, fitted: GpuTypeParams, board: Board, note: str) -> GpuTypeParams:
    """A fitted type on a board other than the one it was measured on (an H100 PCIe, 350 W,
    against the fitted 700 W SXM): its shape scaled to ``board`` (``scaled_to_board``) and, as
    for a type nobody profiled, its speed scaled down by the board's power when the board is
    smaller, never up: half the power at the same speed would credit the unmeasured board with
    half the energy per unit of work."""
    speed = min(1.0, board.max_w / fitted.gpu.tdp_w)
    gpu = scaled_to_board(fitted.gpu, name, board.max_w, board.min_w)

    def job(params: JobParams) -> JobParams:
        return replace(params, base_throughput=params.base_throughput * speed,
                       source=f"{params.source}; ASSUMED on {name}: {note}")

    return GpuTypeParams(gpu, {t: job(p) for t, p in fitted.jobs.items()}, job(fitted.default))


def least_energy_ratio(fitted: GpuTypeParams, primary: GpuTypeParams, board: Board) -> float:
    """Mean over ``primary``'s job types of the least energy per unit of work (against uncapped)
    any cap from ``board``'s minimum up reaches with ``fitted``'s cap response put on that board:
    how much a cap saves on that GPU type; the highest is the type on which caps save least."""
    gpu = scaled_to_board(fitted.gpu, fitted.gpu.name, board.max_w, board.min_w)
    caps = np.linspace(board.min_fraction, 1.0, 60)
    ratios = []
    for job_type in primary.jobs:
        cap = fitted.jobs.get(job_type, fitted.default).cap
        energy = [busy_power_w(gpu, cap, c) * slowdown(gpu, cap, c) for c in caps]
        ratios.append(min(energy) / energy[-1])
    return float(np.mean(ratios))
