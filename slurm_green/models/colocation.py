"""Co-location interference: how much two jobs slow each other down sharing one GPU.

Read from Gavel's pair measurements: when ``a`` and ``b`` share a GPU, ``a`` runs at
``tput_a_shared`` steps/s instead of ``tput_a_alone``. The slowdown of ``a`` is
``tput_a_alone / tput_a_shared`` (>= 1 normally; ``inf`` when the pair does not fit
in memory, which Gavel records as 0.0). EaCO co-locates when both are small.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

Pair = tuple[float, float]


def pair_slowdowns(
    alone: Mapping[str, float], shared: Mapping[tuple[str, str], tuple[float, float]]
) -> dict[tuple[str, str], Pair]:
    """``(a, b) -> (slow_a, slow_b)`` for every measured pair."""
    out = {}
    for (a, b), (tput_a, tput_b) in shared.items():
        if a in alone and b in alone:
            slow_a = alone[a] / tput_a if tput_a > 0 else math.inf
            slow_b = alone[b] / tput_b if tput_b > 0 else math.inf
            out[(a, b)] = (slow_a, slow_b)
    return out


def conservative_default(pairs: Mapping[tuple[str, str], Pair], quantile: float = 0.75) -> float:
    """A slowdown for pairs with an unmeasured member: a high quantile of the fitting pairs,
    so EaCO does not co-locate unknown jobs on optimistic guesses."""
    values = [s for pair in pairs.values() for s in pair if math.isfinite(s)]
    return float(np.quantile(values, quantile)) if values else 2.0
