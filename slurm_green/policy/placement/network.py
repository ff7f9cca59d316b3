"""Where a job's GPUs go: network packing across nodes, buddy blocks inside a node.

Fragmentation is what makes a cluster with free GPUs unable to start a job: one
free GPU on each of eight nodes does not run an 8-GPU job. Two rules limit it:

- *network packing*: a multi-node job takes whole nodes under as few switches as
  possible, choosing the switch whose free nodes it fills most tightly (best fit),
  so all-reduce traffic stays under one switch and large holes stay large;
- *buddy allocation*: inside a node, a power-of-two job gets an aligned block
  (2 GPUs at 0-1 or 2-3, 4 GPUs at 0-3 or 4-7) on the fullest node that has one,
  so freed blocks merge back into larger aligned blocks.

The switch of a node is read from a node feature ``switch=NAME`` (the simulator
sets it; a real site can add it to ``Features`` in slurm.conf); nodes without one
count as one switch each. Placement is computed on a copy of the snapshot's free
GPUs and never changes the cluster: the decision carries the node list and the
backend enacts it (Slurm: ``ReqNodeList``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

import numpy as np

from slurm_green.core.cluster import ClusterSnapshot, Node
from slurm_green.core.decision import DecisionMemo

SWITCH_FEATURE = "switch="


def fragmentation(free: np.ndarray, total: np.ndarray) -> float:
    """Share of free GPUs that sit on partly used nodes (0 = every free GPU is in a whole free node)."""
    free_sum = float(free.sum())
    if free_sum <= 0:
        return 0.0
    whole = float(free[(free == total) & (total > 0)].sum())
    return 1.0 - whole / free_sum


@lru_cache(maxsize=1 << 14)
def _switch_of(name: str, features: tuple[str, ...]) -> str:
    return next((f[len(SWITCH_FEATURE):] for f in features if f.startswith(SWITCH_FEATURE)), f"node:{name}")


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


#: (usable for placement, GPUs, GPUs allocated, allocated indices, switch, free GPUs) of a node.
NodeRow = tuple[bool, int, int, tuple[int, ...], str, int]


@dataclass
class _NodeMemo:
    """What a controller's memo keeps of its nodes (``DecisionMemo``).

    Nodes are immutable and a simulator keeps the unchanged ones between snapshots (and hands
    over the same tuple while none changed), so rows and free-GPU maps are reused for the very
    same objects; the memo holds them, so the identity checks are sound.
    """

    #: Per node name: (the Node object, its row), see ``_node_row``.
    rows: dict[str, tuple[Node, NodeRow]] = field(default_factory=dict)
    #: (node tuple, its rows) of the last call to ``node_rows``.
    last_rows: tuple[tuple[Node, ...], list[NodeRow]] | None = None
    #: (node tuple, FreeGpus built from it): see ``FreeGpus.from_snapshot``.
    last_free: tuple[tuple[Node, ...], FreeGpus] | None = None


def _node_row(node: Node, memo: _NodeMemo) -> NodeRow:
    """The node's ``NodeRow``, reused for the very same Node object."""
    hit = memo.rows.get(node.name)
    if hit is not None and hit[0] is node:
        return hit[1]
    available = node.available
    # a node with no CPU or memory free starts no job: its GPUs are all taken, as Node.gpus_free says
    allocated, indices = ((node.gpus_allocated, node.gpu_indices_allocated) if node.starts_jobs
                          else (node.gpus_total, ()))
    row = (available and node.gpus_total > 0, node.gpus_total, allocated, tuple(indices or range(allocated)),
           _switch_of(node.name, node.features), max(0, node.gpus_total - allocated) if available else 0)
    if len(memo.rows) > 1 << 16:
        memo.rows.clear()
    memo.rows[node.name] = (node, row)
    return row


def node_rows(nodes: tuple[Node, ...], memo: DecisionMemo) -> list[NodeRow]:
    """``_node_row`` of each node; the last tuple's rows are kept (one pass per node tuple)."""
    held = memo.get(_NodeMemo)
    if held.last_rows is not None and held.last_rows[0] is nodes:
        return held.last_rows[1]
    get = held.rows.get
    rows = [hit[1] if (hit := get(n.name)) is not None and hit[0] is n else _node_row(n, held) for n in nodes]
    held.last_rows = (nodes, rows)
    return rows


def gpus_free(nodes: tuple[Node, ...], memo: DecisionMemo) -> int:
    """``ClusterSnapshot.gpus_free`` of these nodes (free GPUs on available nodes), from the memoised rows."""
    return sum([row[5] for row in node_rows(nodes, memo)])


def _free_slots(row: NodeRow, slots: int) -> np.ndarray:
    """Which of ``slots`` GPU slots are free on a usable node, from its ``_node_row``."""
    total, used, indices = row[1], row[2], row[3]
    free = np.arange(slots) < total
    if used >= total:
        free[:] = False
    elif used > 0:
        free[list(indices)] = False
    return free


class NodeChooser(Protocol):
    """Picks the node of a one-node job: a position in ``candidates`` (the nodes with a fitting block)."""

    def __call__(self, free: FreeGpus, candidates: np.ndarray, gpus: int) -> int: ...


@dataclass
class FreeGpus:
    """A scratch copy of which GPU slots are free on each available node."""

    names: tuple[str, ...]
    free: np.ndarray  #: bool [node, slot]
    switch: np.ndarray  #: int switch id per node
    total: np.ndarray  #: int GPUs per node (the slots a node has)
    #: Free slots per node, kept in step with ``free`` by ``_take`` (read on every placement).
    free_count: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.free_count = self.free.sum(axis=1)

    @classmethod
    def from_snapshot(cls, snapshot: ClusterSnapshot, memo: DecisionMemo) -> FreeGpus:
        """A fresh scratch copy of the snapshot's free GPUs.

        The last node tuple's result is kept in ``memo``: a simulator hands the same tuple
        again while no node changed, and keeps the unchanged Node objects in a new tuple, so
        only the nodes that changed are re-read.
        """
        held = memo.get(_NodeMemo)
        nodes = snapshot.nodes
        if held.last_free is None or held.last_free[0] is not nodes:
            made = cls._updated(*held.last_free, nodes, held) if held.last_free is not None else None
            held.last_free = (nodes, made if made is not None else cls._build(nodes, memo))
        made = held.last_free[1]
        return cls(made.names, made.free.copy(), made.switch, made.total)

    @classmethod
    def _build(cls, all_nodes: tuple[Node, ...], memo: DecisionMemo) -> FreeGpus:
        usable = [(n.name, row) for n, row in zip(all_nodes, node_rows(all_nodes, memo)) if row[0]]
        count = len(usable)
        slots = max((row[1] for _, row in usable), default=0)
        free = np.zeros((count, slots), dtype=bool)
        for i, (_, row) in enumerate(usable):
            free[i] = _free_slots(row, slots)
        switch_ids: dict[str, int] = {}
        switch = np.fromiter((switch_ids.setdefault(row[4], len(switch_ids)) for _, row in usable),
                             dtype=np.int64, count=count)
        total = np.fromiter((row[1] for _, row in usable), dtype=np.int64, count=count)
        return cls(tuple(name for name, _ in usable), free, switch, total)

    @classmethod
    def _updated(cls, old_nodes: tuple[Node, ...], old: FreeGpus, nodes: tuple[Node, ...],
                 memo: _NodeMemo) -> FreeGpus | None:
        """``old`` (built from ``old_nodes``) with the nodes that are new objects re-read.

        Only when every node was and stays usable, in the same order, with the same name,
        GPU count and features (so rows, slots and switches are unchanged); ``None`` otherwise.
        """
        if len(nodes) != len(old_nodes) or len(old.names) != len(nodes):
            return None
        free = old.free.copy()
        slots = free.shape[1]
        for i, (before, node) in enumerate(zip(old_nodes, nodes)):
            if node is before:
                continue
            row = _node_row(node, memo)
            if not row[0] or row[1] != slots or node.name != before.name or node.features != before.features:
                return None
            free[i] = _free_slots(row, slots)
        return cls(old.names, free, old.switch, old.total)

    def total_free(self) -> int:
        return int(self.free.sum())

    def place(self, gpus_per_node: int, num_nodes: int, choose: NodeChooser | None = None,
              allowed: np.ndarray | None = None) -> tuple[str, ...] | None:
        """Choose nodes for the job and mark their GPUs taken; ``None`` if it does not fit.

        Only ``allowed`` nodes (bool per node: the job's partition, ``core.partitions``; None:
        any) are candidates. One node is the fullest with a fitting block, or ``choose``'s pick
        among the nodes with one (a site's scoring, ``placement/site.py``); several are packed
        under few switches."""
        if gpus_per_node <= 0 or num_nodes <= 0:
            return None
        fits, block = self._fitting_nodes(gpus_per_node)
        if allowed is not None:
            fits = fits & allowed
        candidates = np.flatnonzero(fits)
        if len(candidates) < num_nodes:
            return None
        if num_nodes > 1:
            chosen = candidates[self._pack(candidates, num_nodes)]
        elif choose is not None:
            chosen = candidates[[choose(self, candidates, gpus_per_node)]]
        else:
            chosen = candidates[[int(np.argmin(self.free_count[candidates] * len(self.names) + candidates))]]
        for i in chosen:
            self._take(int(i), gpus_per_node, block[i])
        return tuple(self.names[int(i)] for i in chosen)

    def _fitting_nodes(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Nodes that can host ``k`` GPUs, and the first aligned block start per node (-1 if none)."""
        slots = self.free.shape[1]
        if k > slots:
            return np.zeros(len(self.names), dtype=bool), np.full(len(self.names), -1)
        if _is_power_of_two(k) and slots % k == 0:
            # Single GPUs (the most common request) need no reduction: a block is a slot.
            blocks = self.free if k == 1 else np.asarray(self.free.reshape(len(self.names), slots // k, k).all(axis=2))
            has = np.asarray(blocks.any(axis=1))
            first = np.where(has, blocks.argmax(axis=1) * k, -1)
            return has, first
        return self.free_count >= k, np.full(len(self.names), -1)

    def _pack(self, candidates: np.ndarray, count: int) -> np.ndarray:
        """Positions in ``candidates`` of ``count`` nodes under as few switches as possible (best fit)."""
        switches = self.switch[candidates]
        ids, sizes = np.unique(switches, return_counts=True)
        big_enough = sizes >= count
        if big_enough.any():
            best = ids[big_enough][np.argmin(sizes[big_enough])]
            order = np.flatnonzero(switches == best)
        else:
            rank = {s: r for r, s in enumerate(ids[np.argsort(-sizes, kind="stable")])}
            order = np.argsort([rank[s] for s in switches], kind="stable")
        fullness = self.free_count[candidates[order]]
        return order[np.argsort(fullness, kind="stable")[:count]] if big_enough.any() else order[:count]

    def _take(self, node: int, k: int, block_start: int) -> None:
        if block_start >= 0:
            self.free[node, block_start: block_start + k] = False
        else:
            self.free[node, np.flatnonzero(self.free[node])[:k]] = False
        self.free_count[node] -= k
