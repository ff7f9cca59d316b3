"""The Alibaba ``openb`` replay of the FGD paper: fill the cluster until it is full.

Weng et al. (ATC'23) evaluate placement by *workload inflation*: tasks are drawn from
the pod list at random, with replacement, and submitted one after the other with no
departures until the arrived GPU requests reach 130 % of the cluster's GPU capacity;
the metric is the share of the cluster's GPU capacity left unallocated as the arrived
workload grows (an ideal scheduler leaves ``max(0, 100 - arrived) %``). This module
reads the pod and node lists, draws the arrivals and replays them through one
``placement.scorer.Scorer``, recording the unallocated share and the cluster's power
(``placement.pwr.node_power_w``) at chosen arrived-workload levels.

GPU power per model comes from the models (``registry.type_params``: idle and maximum
power). The trace's G2/G3 are undisclosed and get the models' conservative board (the
V100's); T4 and A10 are public boards, told to the registry from their datasheets
(``DATASHEET_BOARDS``) before reading, as a node's NVML would.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from slurm_green.models.gpu_types import Board
from slurm_green.models.registry import FittedRegistry
from slurm_green.policy.placement.fgd import Workload
from slurm_green.policy.placement.framework import MILLI, Nodes, Request
from slurm_green.policy.placement.pwr import node_power_w
from slurm_green.policy.placement.scorer import Context, Scorer

POD_LIST = "alibaba_openb_pod_list_default.csv"
NODE_LIST = "alibaba_openb_node_list_gpu_node.csv"
#: NVIDIA datasheet power limits (min, max, default W) of the trace's public GPU models.
DATASHEET_BOARDS = {"t4": Board(60.0, 70.0, 70.0), "a10": Board(100.0, 150.0, 150.0)}
#: The arrived-workload levels (% of cluster GPU capacity) reported by default.
LEVELS_PCT = (80, 90, 95, 100, 110, 120, 130)


@dataclass(frozen=True)
class Cluster:
    """The node list: names, GPU model per node (index into ``models``), GPUs, CPU, memory."""

    names: tuple[str, ...]
    models: tuple[str, ...]
    model: np.ndarray
    gpus: np.ndarray
    cpu_milli: np.ndarray
    mem_mib: np.ndarray

    @property
    def gpu_capacity_milli(self) -> int:
        return int(self.gpus.sum()) * MILLI

    def empty_nodes(self, order: np.ndarray | None = None) -> Nodes:
        """A fresh free state, nodes in ``order`` (a permutation: ties then fall at random, as in the
        authors' simulator, which names nodes in a random order)."""
        idx = np.arange(len(self.names)) if order is None else order
        slots = int(self.gpus.max())
        exists = np.arange(slots)[None, :] < self.gpus[idx, None]
        return Nodes(tuple(self.names[i] for i in idx), self.model[idx].copy(), exists,
                     np.where(exists, MILLI, 0).astype(np.int64), self.cpu_milli[idx].copy(),
                     self.mem_mib[idx].copy(), self.models)


def read_nodes(path: Path) -> Cluster:
    frame = pd.read_csv(path)
    models = tuple(sorted(frame["model"].astype(str).unique()))
    model = np.searchsorted(np.array(models), frame["model"].astype(str).to_numpy())
    return Cluster(tuple(frame["sn"].astype(str)), models, model.astype(np.int64),
                   frame["gpu"].to_numpy(np.int64), frame["cpu_milli"].to_numpy(np.int64),
                   frame["memory_mib"].to_numpy(np.int64))


def read_pods(path: Path, models: tuple[str, ...]) -> list[Request]:
    """One request per pod; ``gpu_milli`` counts only for single-GPU pods (the trace's rule);
    ``gpu_spec`` (``|``-separated models, empty: any) limits the models."""
    frame = pd.read_csv(path, keep_default_na=False)
    index = {m: i for i, m in enumerate(models)}
    requests = []
    for cpu, mem, gpus, milli, spec in zip(frame["cpu_milli"], frame["memory_mib"], frame["num_gpu"],
                                           frame["gpu_milli"], frame["gpu_spec"], strict=True):
        allowed = frozenset(index[m] for m in str(spec).split("|") if m in index) if spec else None
        share = int(milli) if int(gpus) == 1 and 0 < int(milli) < MILLI else MILLI
        requests.append(Request(int(gpus), share, int(cpu), int(mem), allowed))
    return requests


def inflate(requests: list[Request], capacity_milli: int, ratio: float, seed: int) -> list[Request]:
    """Tasks drawn with replacement until their GPU requests reach ``ratio`` x capacity."""
    rng = np.random.default_rng(seed)
    milli = np.array([r.total_milli for r in requests])
    mean = milli.mean()
    drawn: list[int] = []
    arrived = 0
    while arrived < ratio * capacity_milli:
        batch = rng.integers(0, len(requests), int((ratio * capacity_milli - arrived) / mean) + 16)
        cut = np.searchsorted(np.cumsum(milli[batch]) + arrived, ratio * capacity_milli) + 1
        drawn.extend(batch[:cut].tolist())
        arrived += int(milli[batch[:cut]].sum())
    return [requests[i] for i in drawn]


def gpu_power_by_model(registry: FittedRegistry, models: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(idle W, max W) of each model's GPU, from the models (datasheet boards told first)."""
    for name, board in DATASHEET_BOARDS.items():
        if any(registry.gpu_type(m) == name for m in models):
            registry.observe_board(name, board.min_w, board.max_w, board.default_w)
    params = [registry.type_params(m)[0].gpu for m in models]
    return np.array([p.idle_w for p in params]), np.array([p.tdp_w for p in params])


@dataclass(frozen=True)
class Replay:
    """One run, per level: the unallocated share of GPU capacity, the cluster's power, the GPUs
    with anything on them and the nodes awake (both what power models charging a whole GPU
    for any share, or a whole node for any task, would count)."""

    levels_pct: tuple[int, ...]
    unallocated_pct: tuple[float, ...]
    power_kw: tuple[float, ...]
    gpus_in_use: tuple[int, ...]
    nodes_awake: tuple[int, ...]
    tasks: int
    failed: int


def replay(cluster: Cluster, arrivals: list[Request], scorer: Scorer, nodes: Nodes,
           idle_w: np.ndarray, max_w: np.ndarray, levels_pct: tuple[int, ...] = LEVELS_PCT) -> Replay:
    """Submit ``arrivals`` in order on ``nodes`` (changed in place); a task that fits nowhere fails
    and is dropped (no queue, as in the paper). Recorded when the arrived GPU requests first
    reach each level."""
    capacity = cluster.gpu_capacity_milli
    marks = [lv * capacity / 100 for lv in levels_pct]
    unallocated: list[float] = []
    power: list[float] = []
    in_use: list[int] = []
    awake: list[int] = []
    arrived = allocated = failed = 0
    for request in arrivals:
        arrived += request.total_milli
        if scorer.place(nodes, request) is None:
            failed += 1
        else:
            allocated += request.total_milli
        while len(unallocated) < len(marks) and arrived >= marks[len(unallocated)]:
            unallocated.append(100.0 * (1 - allocated / capacity))
            used = nodes.gpu_used
            power.append(float(node_power_w(used, nodes.gpu_exists, idle_w[nodes.model],
                                            max_w[nodes.model]).sum()) / 1000)
            in_use.append(int((used > 0).sum()))
            awake.append(int((used > 0).any(axis=1).sum()))
    return Replay(tuple(levels_pct[:len(unallocated)]), tuple(unallocated), tuple(power), tuple(in_use),
                  tuple(awake), len(arrivals), failed)


def run(scorer_weights: dict[str, float], cluster: Cluster, pods: list[Request], registry: FittedRegistry,
        seed: int = 0, ratio: float = 1.3, levels_pct: tuple[int, ...] = LEVELS_PCT) -> Replay:
    """One seeded replay of ``pods`` inflated to ``ratio`` under the weighted scorer."""
    idle_w, max_w = gpu_power_by_model(registry, cluster.models)
    order = np.random.default_rng(seed).permutation(len(cluster.names))
    nodes = cluster.empty_nodes(order)
    context = Context(nodes, Workload.from_requests(pods, len(cluster.models)), idle_w, max_w, seed)
    scorer = Scorer.from_weights(scorer_weights, context)
    arrivals = inflate(pods, cluster.gpu_capacity_milli, ratio, seed)
    return replay(cluster, arrivals, scorer, nodes, idle_w, max_w, levels_pct)
