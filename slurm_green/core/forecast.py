"""What a policy asks of a carbon forecast (``slurm_green.carbon.signal.CarbonSignal``).

A protocol here, not the class, so ``core`` and the policies stay free of pandas and
of the carbon package, and a test can hand over any piecewise-constant signal.
Times are epoch seconds; intensities gCO2eq/kWh.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class CarbonForecast(Protocol):
    """A piecewise-constant intensity forecast, queried in bulk by the policies."""

    @property
    def starts(self) -> np.ndarray:
        """Period starts, epoch seconds, strictly increasing."""
        ...

    @property
    def start(self) -> float:
        """Start of the first period."""
        ...

    @property
    def end(self) -> float:
        """End of the last period: later times read the last value (the controller's tick says
        so when this falls short of its horizon)."""
        ...

    @property
    def step(self) -> float:
        """Period length in seconds."""
        ...

    def value_at(self, t_epoch: float | np.ndarray) -> float | np.ndarray:
        """Intensity at time(s) ``t_epoch``."""
        ...

    def mean_over(self, t0: float | np.ndarray, t1: float | np.ndarray) -> float | np.ndarray:
        """Time-weighted mean intensity over ``[t0, t1]``."""
        ...

    def window_means(self, starts: np.ndarray, durations: np.ndarray) -> np.ndarray:
        """Mean intensity of a run of each duration from each start, shape [durations, starts]."""
        ...

    def best_start(self, earliest: float, latest: float, duration: float) -> float:
        """The start in ``[earliest, latest]`` with the lowest mean intensity over ``duration``."""
        ...

    def start_candidates(self, earliest: float, latest: float, duration: float) -> tuple[np.ndarray, np.ndarray]:
        """Every start in ``[earliest, latest]`` where the mean over ``duration`` can be lowest,
        in time order (the first is ``earliest``), with those means."""
        ...
