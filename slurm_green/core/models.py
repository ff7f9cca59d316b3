"""The models interface policies, the controller and the simulator program against.

It lives in ``core`` because policies (``DecisionContext.models``) and the simulator
depend on it and ``slurm_green.models`` implements it (``FittedRegistry``), so neither
side imports the other.

A ``JobModel`` answers, for one job type, how fast it trains and how much power it
draws in a given configuration. Throughput is in the job type's own work units per
second (samples/s, steps/s); only ratios between configurations of the same job
matter to a policy, so ``speedup`` is what most callers use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True, slots=True)
class Config:
    """A way to run a job: GPUs in all, over how many nodes, at what power-cap fraction."""

    gpus: int
    nodes: int = 1
    cap_fraction: float = 1.0


class JobModel(Protocol):
    job_type: str

    def throughput(self, config: Config) -> float:
        """Work units per second in ``config``."""
        ...

    def power_w(self, config: Config) -> float:
        """Average electrical power of all the job's GPUs in ``config``, watts."""
        ...


class ModelRegistry(Protocol):
    """What policies and the simulator ask of a registry (``FittedRegistry`` answers all of it)."""

    @property
    def revision(self) -> int:
        """Bumped whenever an answer may change (telemetry corrected a model, a board was
        learned): whoever keeps answers (``policy/config_table``) rebuilds them when it moves."""
        ...

    def for_job(self, job_type: str | None, gpu: str | None = None) -> JobModel:
        """The model of ``job_type`` on ``gpu`` (None: the registry's own type); a conservative
        default for an unknown or missing type."""
        ...

    def allowed_caps(self, gpu: str | None = None, *, accept_cap: bool = True, floor: float = 0.0,
                     step: float = 0.05) -> tuple[float, ...]:
        """The cap fractions a policy may choose on ``gpu``, never below ``floor``; (1.0,) without ``accept_cap``."""
        ...

    def board_power_w(self, gpu: str | None = None) -> tuple[float, float]:
        """``gpu``'s (idle, maximum) board power in watts: what waking a GPU and running it flat out cost."""
        ...

    def colocated_slowdown(self, type_a: str | None, type_b: str | None, gpu: str | None = None,
                           mechanism: str = "timeslice") -> tuple[float, float]:
        """Time stretch (>= 1, ``inf`` if they do not fit) of each job when both share one GPU."""
        ...

    def colocation(self, type_a: str | None, type_b: str | None, gpu: str | None = None,
                   mechanism: str = "timeslice", power_a_w: float | None = None,
                   power_b_w: float | None = None, cap_fraction: float | None = None) -> tuple[float, float, float]:
        """``(slow_a, slow_b, power_w)``: both slowdowns and the shared GPU's power (W) under
        ``mechanism`` (``timeslice`` = gres/shard, ``mps`` = gres/mps); ``power_x_w`` a job's
        measured power alone on one GPU (telemetry), the proxy for a type no table covers;
        ``cap_fraction`` the cap the shared GPU runs under (None or 1.0: uncapped), which bounds its
        power and, where it binds, stretches both slowdowns (``colocation.clip_stretch``)."""
        ...

    def colocation_arrays(self, types_a: Sequence[str | None], types_b: Sequence[str | None], gpu: str | None = None,
                          mechanism: str = "timeslice", power_a_w: Sequence[float] | np.ndarray | None = None,
                          power_b_w: Sequence[float] | np.ndarray | None = None,
                          cap_fraction: float | Sequence[float] | np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """``colocation`` over sequences of pairs: arrays ``slow_a, slow_b, power_w``."""
        ...


@runtime_checkable
class ModelProvenance(Protocol):
    """What a decision records of the models behind it (``controller.tick.stamped``); models
    that cannot say (a test's literal model) leave decisions without it."""

    @property
    def params_id(self) -> str:
        """Names the model parameters (a hash of the fitted file)."""
        ...

    def assumed(self, job_type: str | None, gpu: str | None = None) -> str:
        """What ``for_job(job_type, gpu)`` assumes rather than fits, said for a person: "" when
        both the job type and the GPU type are modelled on their own data, else why not (a
        job name matching no modelled type, a GPU type nobody profiled)."""
        ...


@dataclass(frozen=True, slots=True)
class Observation:
    """What one finished job was measured doing in ``config``; ``None`` where not measured.

    ``gpu``: the GPU type it ran on (NVML's product name or the gres type), ``None``
    for the registry's own type; ``board``: its board's (min, max, default) power limits
    in W as NVML reported them on the node (the Epilog's energy record), if known.
    """

    job_type: str | None
    config: Config
    throughput: float | None = None
    power_w: float | None = None
    gpu: str | None = None
    board: tuple[float, float, float] | None = None


@runtime_checkable
class TelemetrySink(Protocol):
    def learn(self, seen: Observation) -> None:
        """Refine the models with what one finished job was measured doing (its board's
        limits, its throughput and power on its GPU type): the tick's one call per job."""
        ...


def speedup(model: JobModel, config: Config) -> float:
    """Throughput relative to one GPU at full power: how much faster ``config`` finishes."""
    return model.throughput(config) / model.throughput(Config(gpus=1))


def energy_per_work_j(model: JobModel, config: Config) -> float:
    """Joules per unit of work: what an energy or carbon budget is spent on."""
    return model.power_w(config) / model.throughput(config)
