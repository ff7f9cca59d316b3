"""Model answers for every (job type, GPU count, power cap) a policy may choose, as arrays.

A vectorised policy must not call a Python model per job and per candidate: with
10,000 pending jobs that is millions of calls. Jobs of one type share their model,
so the models are asked once per type and candidate configuration and the answers
are kept in arrays indexed ``[type, gpu_option, cap_option]``. The answers depend
only on the registry and its ``revision``, so a controller's memo (``DecisionMemo``)
keeps them; this does not make a policy stateful, it only avoids asking the same
question twice.

A job's speed and power depend on the GPU it runs on, so a table answers for one GPU
type (``gpu_type``; ``None``: the registry's own type, what every table was before
clusters had types) and the memo keeps one table per type. A policy deciding for a
mixed cluster asks one table per GPU type its jobs can run on (``policy/gpu_types.py``)
and the caps that type allows (``cap_choices``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from slurm_green.core.decision import DecisionMemo
from slurm_green.core.models import Config, ModelRegistry


def layout(gpus: int, gpus_per_node: int) -> tuple[int, int] | None:
    """(GPUs per node, nodes) for ``gpus`` packed onto as few nodes as possible.

    Slurm allocates the same number of GPUs on every node of a job, so a count
    that cannot be split evenly over the fewest nodes (6 GPUs on 4-GPU nodes is
    fine as 2 x 3, 5 is not) has no layout and is never a candidate.
    """
    if gpus <= gpus_per_node:
        return gpus, 1
    nodes = math.ceil(gpus / gpus_per_node)
    if gpus % nodes:
        return None
    return gpus // nodes, nodes


@lru_cache(maxsize=4096)
def gpu_options(requested: int, low: int, high: int, gpus_per_node: int) -> tuple[int, ...]:
    """Candidate GPU counts in [low, high]: powers of two (buddy blocks) and the request itself."""
    counts = {requested} if low <= requested <= high else set()
    power = 1
    while power <= high:
        if power >= low:
            counts.add(power)
        power *= 2
    if not counts:
        counts.add(low)
    return tuple(sorted(g for g in counts if layout(g, gpus_per_node) is not None)) or (requested,)


@dataclass(frozen=True)
class ConfigTable:
    """Throughput (work/s) and power (W) of each job type in each candidate configuration.

    ``gpus`` and ``caps`` are the candidate axes; ``throughput[t, g, c]`` and
    ``power_w[t, g, c]`` answer for type index ``t`` (see ``type_index``) on GPUs of
    ``gpu_type`` (``None``: the registry's own type).
    """

    gpus: np.ndarray
    caps: np.ndarray
    type_index: dict[str | None, int]
    throughput: np.ndarray
    power_w: np.ndarray
    gpus_per_node: int
    gpu_type: str | None = None


#: The most job types (names) a kept table grows to before it starts again from those asked.
MAX_TYPES = 256
#: What a table answers for: (GPU type, caps, GPUs per node).
_TableKey = tuple[str | None, tuple[float, ...], int]


@dataclass
class _TablesMemo:
    """A controller's tables (``DecisionMemo``): per key, the registry and its ``revision``
    they were built from (the held registry keeps the identity check sound), and the table."""

    tables: dict[_TableKey, tuple[ModelRegistry, int, ConfigTable]] = field(default_factory=dict)


def cap_choices(models: ModelRegistry, gpu_type: str | None, *, floor: float, step: float) -> tuple[float, ...]:
    """The caps a policy may choose on ``gpu_type`` (the registry's ``allowed_caps``, from the
    board's minimum or ``floor`` if higher, every ``step``); 1.0 is always among them."""
    return models.allowed_caps(gpu_type, accept_cap=True, floor=floor, step=step)


def _build(models: ModelRegistry, job_types: tuple[str | None, ...], gpus: tuple[int, ...], caps: tuple[float, ...],
           gpus_per_node: int, gpu_type: str | None) -> ConfigTable:
    shape = (len(job_types), len(gpus), len(caps))
    tput = np.zeros(shape)
    power = np.zeros(shape)
    for t, job_type in enumerate(job_types):
        model = models.for_job(job_type, gpu_type)
        for g, count in enumerate(gpus):
            nodes = layout(count, gpus_per_node)
            n = nodes[1] if nodes else math.ceil(count / gpus_per_node)
            for c, cap in enumerate(caps):
                config = Config(gpus=count, nodes=n, cap_fraction=cap)
                tput[t, g, c] = model.throughput(config)
                power[t, g, c] = model.power_w(config)
    return ConfigTable(np.asarray(gpus), np.asarray(caps), {jt: i for i, jt in enumerate(job_types)},
                       tput, power, gpus_per_node, gpu_type)


def config_table(models: ModelRegistry, job_types: set[str | None], gpus: set[int], caps: tuple[float, ...],
                 gpus_per_node: int, gpu_type: str | None = None, memo: DecisionMemo | None = None) -> ConfigTable:
    """A table covering these types and candidate counts on ``gpu_type`` (``None``: the
    registry's own type), kept in ``memo`` per GPU type (``None``: a one-off table).

    The memo's table grows to the union of what was asked, so a simulation that sees a few
    more types or counts over time rebuilds only a handful of times. A type is a job's name,
    and on a site whose users name every job afresh the union would grow with every job and
    each new name rebuild all of it (0.38 s per new name at 2,000 names): past ``MAX_TYPES``
    the table starts again from the types asked now (the answers are the same). It is rebuilt when
    the registry's ``revision`` moves (telemetry corrected a model), so a policy never
    plans with answers the registry no longer gives.
    """
    if memo is None:
        return _build(models, _sorted_types(job_types), tuple(sorted(gpus)), tuple(caps), gpus_per_node, gpu_type)
    tables = memo.get(_TablesMemo).tables
    key = (gpu_type, tuple(caps), gpus_per_node)
    revision = models.revision
    held = tables.get(key)
    table = held[2] if held is not None and held[0] is models and held[1] == revision else None
    if table is not None and job_types <= table.type_index.keys() and gpus <= set(table.gpus.tolist()):
        return table
    if table is not None:
        gpus = gpus | set(table.gpus.tolist())
        if len(job_types | table.type_index.keys()) <= MAX_TYPES:
            job_types = job_types | table.type_index.keys()
    table = _build(models, _sorted_types(job_types), tuple(sorted(gpus)), tuple(caps), gpus_per_node, gpu_type)
    tables[key] = (models, revision, table)
    return table


def _sorted_types(job_types: set[str | None]) -> tuple[str | None, ...]:
    return tuple(sorted(job_types, key=lambda x: (x is None, x or "")))
