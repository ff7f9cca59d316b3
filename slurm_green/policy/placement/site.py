"""A site's placement weights in the policies that place jobs (GreenFlow, PowerFlow).

``[policy] placement = { pwr = 0.5, fgd = 0.5 }`` makes the scoring framework
(``scorer.Scorer``: packing, best fit, buddy, FGD, PWR) choose the node of every one-node
job a plan starts now, instead of network placement's fullest node with a fitting block.
Jobs spanning nodes keep network packing (the plugins score one node). The choice is made
on the plan's scratch copy of the free GPUs (``network.FreeGpus``), among the nodes with an
aligned block, which the job then takes as before; the plugins see that copy as their
``Nodes`` (whole GPUs: a node whose CPUs or memory other jobs hold all of shows none free,
``Node.starts_jobs``; CPUs and memory do not limit otherwise).

What each plugin needs comes from the decision: FGD's target workload is the GPUs per node
of the pool's jobs, pending and running (the distribution FGD expects the next requests to
follow); PWR's GPU power is the models' board idle and maximum for the pool's GPU type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from slurm_green.core.cluster import ClusterSnapshot, JobState
from slurm_green.core.models import ModelRegistry
from slurm_green.policy.placement.fgd import Workload
from slurm_green.policy.placement.framework import MILLI, UNREPORTED, Nodes, Request
from slurm_green.policy.placement.network import FreeGpus
from slurm_green.policy.placement.scorer import PLUGINS, Context, Scorer


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """``weights`` if they name known plugins with non-negative weights summing above 0 (or
    are empty: network placement); else a ValueError saying what is wrong."""
    unknown = sorted(set(weights) - set(PLUGINS))
    if unknown:
        raise ValueError(f"unknown placement plugin(s) {', '.join(unknown)}; choose from {', '.join(PLUGINS)}")
    if weights and (any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0):
        raise ValueError("placement weights must be non-negative with a positive sum")
    return dict(weights)


@dataclass(frozen=True)
class ScoredChoice:
    """``network.NodeChooser`` by a site's weighted plugins, for one pool at one decision."""

    scorer: Scorer

    @classmethod
    def for_pool(cls, weights: Mapping[str, float], pool: ClusterSnapshot, models: ModelRegistry,
                 gpu: str | None) -> ScoredChoice:
        """The chooser of ``weights`` for ``pool`` (one GPU type, ``gpu``)."""
        requests = [Request(job.gpus_per_node) for job in pool.jobs
                    if job.gpus_per_node > 0 and job.state in (JobState.PENDING, JobState.RUNNING)]
        idle_w, max_w = models.board_power_w(gpu) if weights.get("pwr") else (0.0, 0.0)
        slots = max((node.gpus_total for node in pool.nodes), default=0)
        empty = _nodes(np.ones((len(pool.nodes), slots), dtype=bool),
                       np.array([node.gpus_total for node in pool.nodes], dtype=np.int64))
        context = Context(empty, workload=Workload.from_requests(requests or [Request(1)], 1),
                          idle_w_by_model=np.array([idle_w]), max_w_by_model=np.array([max_w]))
        return cls(Scorer.from_weights(weights, context))

    def __call__(self, free: FreeGpus, candidates: np.ndarray, gpus: int) -> int:
        allowed = np.zeros(len(free.names), dtype=bool)
        allowed[candidates] = True
        chosen = self.scorer.choose(_nodes(free.free, free.total), Request(gpus), allowed)
        assert chosen is not None, "a node with a free block of the job's GPUs passes the scorer's filter"
        return int(np.flatnonzero(candidates == chosen[0])[0])


def _nodes(free: np.ndarray, total: np.ndarray) -> Nodes:
    """Free GPU slots [node, slot] and GPUs per node as the framework's ``Nodes`` (one GPU type)."""
    exists = np.arange(free.shape[1])[None, :] < total[:, None]
    big = np.full(len(total), UNREPORTED, dtype=np.int64)
    return Nodes(tuple(str(i) for i in range(len(total))), np.zeros(len(total), dtype=np.int64), exists,
                 np.where(free & exists, MILLI, 0).astype(np.int64), big, big.copy())
