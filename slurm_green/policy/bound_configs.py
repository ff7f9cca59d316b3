"""Every configuration a job could run in, for the carbon bounds: its power and runtime in each.

A bound must hold for every schedule Slurm (or the simulator) could run under the same
models, so its levers are wider than any one policy's candidates:

- every GPU count in the job's allowed range (not only powers of two), in every layout
  Slurm can give it (``p`` GPUs on each of ``n`` nodes, ``p`` at most a node's GPUs, ``n``
  at most the nodes of its type): spreading over more nodes is slower but draws less
  power, so it is not ruled out in carbon a priori; and the layout it was submitted with;
- every cap its GPU type allows (``allowed_caps``) on a 0.05 grid, the finest any policy
  chooses from (GreenFlow and Zeus 0.1, window and EaCO 0.05), only 1.0 if caps are refused;
- the models of the GPU type the job runs on (``None``: the registry's own type).

Configurations another one beats on every axis that matters are dropped, which keeps the
bounds exact and their size small. For the capacity-blind bound the axes are power and
runtime: carbon is power times the integral of intensity over the run, and that integral
only grows with the runtime (intensity is not negative). For the LP they are GPU-seconds,
energy and seconds per unit of work, the three things a unit of work costs there; as the
LP may mix configurations, one that a mix of others beats is dropped too (``_lower_hull``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from slurm_green.core.models import Config, ModelRegistry

#: Cap grid of the bounds: the finest any policy uses.
CAP_STEP = 0.05


@dataclass(frozen=True)
class BoundJobs:
    """What a bound knows of each job (arrays in job order)."""

    submit: np.ndarray  #: POSIX s: no work before it
    work: np.ndarray  #: work units (the models' throughput is work per second)
    job_type: tuple[str | None, ...]
    gpu_type: tuple[str | None, ...]  #: the type whose models the job runs with (None: the registry's own)
    per_node: np.ndarray  #: GPUs per node as submitted
    nodes: np.ndarray  #: nodes as submitted
    gpus_min: np.ndarray
    gpus_max: np.ndarray
    accept_cap: bool = True

    def __len__(self) -> int:
        return len(self.submit)


@dataclass(frozen=True)
class ClusterShape:
    gpus_per_node: int
    nodes: dict[str | None, int]  #: nodes of each GPU type (the key of ``BoundJobs.gpu_type``)

    def gpus(self, gpu_type: str | None) -> int:
        return self.nodes[gpu_type] * self.gpus_per_node


class Keep(Enum):
    """Which configurations may be dropped: those beaten on the axes of the bound at hand."""

    CARBON = "power, runtime"
    LP = "GPU-seconds, energy and seconds per unit of work"


@dataclass(frozen=True)
class Candidates:
    """One row per (job, configuration) kept."""

    job: np.ndarray
    gpus: np.ndarray
    power_w: np.ndarray
    runtime_s: np.ndarray


def layouts(low: int, high: int, per_node: int, nodes: int, gpus_per_node: int, max_nodes: int) -> list[tuple[int, int]]:
    """(GPUs per node, nodes) of every count in [low, high] Slurm can allocate, and the submitted one."""
    out = {(per_node, nodes)}
    for p in range(1, gpus_per_node + 1):
        for n in range(max(1, -(-low // p)), min(max_nodes, high // p) + 1):
            out.add((p, n))
    return sorted(out, key=lambda pn: (pn[0] * pn[1], pn[1]))


def candidates(jobs: BoundJobs, models: ModelRegistry, shape: ClusterShape, keep: Keep,
               cap_step: float = CAP_STEP) -> Candidates:
    """Every job's configurations (see the module docstring), less those ``keep`` says cannot help."""
    groups: dict[tuple, list[int]] = {}
    for j in range(len(jobs)):
        key = (jobs.job_type[j] or None, jobs.gpu_type[j], int(jobs.gpus_min[j]), int(jobs.gpus_max[j]),
               int(jobs.per_node[j]), int(jobs.nodes[j]))
        groups.setdefault(key, []).append(j)
    parts: list[tuple[np.ndarray, ...]] = []
    for (job_type, gpu_type, low, high, per_node, nodes), members in groups.items():
        model = models.for_job(job_type) if gpu_type is None else models.for_job(job_type, gpu_type)
        caps = models.allowed_caps(gpu_type, accept_cap=jobs.accept_cap, floor=0.0, step=cap_step)
        configs = [Config(p * n, n, c) for p, n in layouts(low, high, per_node, nodes, shape.gpus_per_node,
                                                             shape.nodes[gpu_type]) for c in caps]
        gpus = np.array([c.gpus for c in configs], dtype=np.int64)
        tput = np.array([model.throughput(c) for c in configs])
        power = np.array([model.power_w(c) for c in configs])
        axes = (power, 1 / tput) if keep is Keep.CARBON else (gpus / tput, power / tput, 1 / tput)
        cost = np.column_stack(axes)
        kept = _front(cost)
        if keep is Keep.LP:
            kept[kept] = _lower_hull(cost[kept])
        idx = np.asarray(members)
        job = np.repeat(idx, kept.sum())
        parts.append((job, np.tile(gpus[kept], len(idx)), np.tile(power[kept], len(idx)),
                      jobs.work[job] / np.tile(tput[kept], len(idx))))
    job, gpus, power, runtime = (np.concatenate(column) for column in zip(*parts))  # every job has a candidate
    return Candidates(job.astype(np.int64), gpus.astype(np.int64), power, runtime)


def _lower_hull(cost: np.ndarray) -> np.ndarray:
    """Rows no convex combination of the others matches or beats on every column, in the LP's sense.

    The LP may split a job's work in a slot over several configurations, so one that some
    mix of others beats on every column is never needed: these are the vertices of the
    hull of the rows plus the positive orthant (the rows shifted far along each axis are
    added to close it). Where the rows are degenerate (all in a plane, e.g. one GPU count)
    Qhull cannot answer and every row is kept: sound, only larger. (scipy is the ``bounds``
    extra, imported here so the capacity-blind bound, which ``slurm-green bench`` prints, needs none.)
    """
    from scipy.spatial import ConvexHull, QhullError

    if len(cost) <= cost.shape[1]:
        return np.ones(len(cost), dtype=bool)
    scaled = cost / cost.min(axis=0)
    far = 10.0 * scaled.max()
    points = np.vstack([scaled, *(scaled + far * np.eye(cost.shape[1])[k] for k in range(cost.shape[1]))])
    try:
        vertices = ConvexHull(points).vertices
    except QhullError:
        return np.ones(len(cost), dtype=bool)
    keep = np.zeros(len(cost), dtype=bool)
    keep[vertices[vertices < len(cost)]] = True
    return keep


def _front(cost: np.ndarray) -> np.ndarray:
    """Rows no other row matches or beats on every column (of exact duplicates, the first)."""
    k = len(cost)
    keep = np.ones(k, dtype=bool)
    for lo in range(0, k, 256):
        rows = cost[lo: lo + 256]
        le = (cost[None, :, :] <= rows[:, None, :]).all(axis=2)
        lt = (cost[None, :, :] < rows[:, None, :]).any(axis=2)
        earlier_twin = (cost[None, :, :] == rows[:, None, :]).all(axis=2) & (np.arange(k)[None, :] < np.arange(lo, lo + len(rows))[:, None])
        keep[lo: lo + 256] = ~((le & lt) | earlier_twin).any(axis=1)
    return keep
