"""Literal cluster states for the placement plugin tests (imported by them)."""

from __future__ import annotations

import numpy as np

from slurm_green.policy.placement.framework import MILLI, Nodes


def state(free: list[list[int]], cpu: list[int] | None = None, model: list[int] | None = None) -> Nodes:
    """Nodes ``n0, n1, ...`` whose GPUs have these free milli (rows may differ in length: fewer GPUs)."""
    slots = max(len(row) for row in free)
    exists = np.array([[s < len(row) for s in range(slots)] for row in free])
    gpu_free = np.array([row + [0] * (slots - len(row)) for row in free], dtype=np.int64)
    count = len(free)
    return Nodes(tuple(f"n{i}" for i in range(count)), np.array(model or [0] * count, dtype=np.int64), exists,
                 gpu_free, np.array(cpu or [64_000] * count, dtype=np.int64),
                 np.full(count, 1 << 20, dtype=np.int64), ("g",) * (max(model or [0]) + 1))


IDLE = [MILLI] * 4
