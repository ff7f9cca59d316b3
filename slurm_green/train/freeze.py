"""Which front layers to freeze: an AutoFreeze/Egeria-style test on plain numbers.

Input: one history per layer (front to back) of a change measure taken at successive
checks, e.g. the layer's gradient norm (AutoFreeze) or the norm of its weights' change
since the previous check. A layer has converged when, over its last ``window`` checks,
each value moved by at most ``threshold`` relative to the one before. Only a prefix
freezes (the backward pass stops at the first trainable layer, so a frozen layer behind
a trainable one saves nothing; models/freezing.py): the front-most converged layers, up
to the first that has not. The frozen share, weighted by each layer's ``cost`` (default
1 each: the share of layers, what models/freezing.py calls ``f``), never exceeds the
user's ``max_share``, and the last layer always trains. Layers already frozen stay
frozen (their histories stop changing). Pure and deterministic: the same numbers give
the same answer on every rank of a data-parallel job, so all ranks freeze alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def converged(history: Sequence[float], threshold: float, window: int) -> bool:
    """Each of the last ``window`` values within ``threshold`` (relative) of the one before;
    False with too few values or any non-finite one (a NaN gradient is no sign of rest)."""
    if len(history) < window + 1:
        return False
    recent = history[-(window + 1):]
    if not all(math.isfinite(v) for v in recent):
        return False
    for before, after in zip(recent, recent[1:]):
        scale = abs(before)
        change = abs(after - before)
        if change > threshold * scale or (scale == 0 and change > 0):
            return False
    return True


def frozen_share(layers: int, costs: Sequence[float]) -> float:
    """The share of the total cost in the first ``layers`` layers."""
    return sum(costs[:layers]) / sum(costs)


def frozen_prefix(histories: Sequence[Sequence[float]], *, threshold: float, window: int, max_share: float,
                  already: int = 0, costs: Sequence[float] | None = None) -> int:
    """How many front layers to freeze now (at least ``already``): see the module docstring."""
    n = len(histories)
    weights = list(costs) if costs is not None else [1.0] * n
    _check(n, weights, threshold, window, max_share, already)
    if frozen_share(already, weights) > max_share + 1e-12:
        raise ValueError(f"{already} layers already frozen exceed max_share {max_share}")
    k = already
    while k < n - 1 and converged(histories[k], threshold, window) \
            and frozen_share(k + 1, weights) <= max_share + 1e-12:
        k += 1
    return k


def _check(n: int, costs: list[float], threshold: float, window: int, max_share: float, already: int) -> None:
    if n < 1 or len(costs) != n:
        raise ValueError(f"{n} layer histories, {len(costs)} costs: expected one of each per layer, at least one")
    if not all(math.isfinite(c) and c > 0 for c in costs):
        raise ValueError("layer costs must be finite and > 0")
    if not (math.isfinite(threshold) and threshold > 0) or window < 1:
        raise ValueError(f"threshold {threshold!r}, window {window!r}: expected threshold > 0, window >= 1")
    if not 0 <= max_share <= 1 or not 0 <= already < n:
        raise ValueError(f"max_share {max_share!r}, already {already!r}: expected 0-1 and 0..{n - 1}")
