"""Random: a uniformly random feasible option (the sanity baseline of the FGD evaluation)."""

from __future__ import annotations

import numpy as np

from slurm_green.policy.placement.framework import Nodes, Options, Request


class RandomScore:
    """Independent uniform scores from a seeded generator (reproducible runs)."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)

    def score(self, nodes: Nodes, request: Request, options: Options) -> np.ndarray:
        return self._rng.random(len(options))
