"""GPU types by name, board limits, and the conservative model of a GPU type nobody profiled.

Slurm names a node's GPUs by its gres type (``gpu:h100:8``), NVML by the board's
product name (``NVIDIA H100 80GB HBM3``); both map to one canonical type here. A type
without fitted parameters still gets a model, built from what its board reports
(NVML's min/max/default power limits) so that a policy never profits from a guess:

* speed: the primary type's, scaled down by the board's power when it is smaller
  (never up: an unmeasured GPU is not assumed faster than a measured one);
* power: idle, draw ratio and cap sharpness the highest of any fitted type (less
  saved by a cap, more time lost to it); each job's uncapped draw and cap
  sensitivity the highest it has on any fitted type;
* caps: from the board's own minimum to its maximum.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from slurm_green.models.params import GpuTypeParams, JobParams
from slurm_green.models.power_cap import CapParams, GpuPowerParams


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


def conservative_type(name: str, board: Board, primary: GpuTypeParams,
                      fitted: Mapping[str, GpuTypeParams], note: str) -> GpuTypeParams:
    """The model of ``name``, a GPU type without fitted parameters, from its ``board`` (see module doc)."""
    shapes = [t.gpu for t in fitted.values()]
    gpu = GpuPowerParams(
        name=name, tdp_w=board.max_w, idle_w=board.max_w * max(s.idle_w / s.tdp_w for s in shapes),
        draw_ratio=max(s.draw_ratio for s in shapes), exponent=max(s.exponent for s in shapes),
        cap_min=board.min_fraction,
    )
    speed = min(1.0, board.max_w / primary.gpu.tdp_w)

    def job(params: JobParams, caps: list[CapParams]) -> JobParams:
        cap = CapParams(max(c.natural_power_fraction for c in caps), max(c.beta for c in caps))
        return replace(params, gpu=name, base_throughput=params.base_throughput * speed, cap=cap,
                       source=f"{params.source}; ASSUMED on {name}: {note}")

    jobs = {t: job(p, [f.jobs[t].cap for f in fitted.values() if t in f.jobs]) for t, p in primary.jobs.items()}
    return GpuTypeParams(gpu, jobs, job(primary.default, [f.default.cap for f in fitted.values()]))
