"""Carbon for a simulation: a recorded series replayed over the trace's span, and the feed a tick reads.

The carbon layer does the reading and the replay (``FileSource(..., replay=True)``:
a recorded year is mapped onto any time keeping the hour of the week). The policy
sees a perfect forecast (the replayed future), as ``FileSource`` does by default in
replay; accounting uses the same series.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from slurm_green.carbon.datasets import carbon_files
from slurm_green.carbon.feed import CarbonSnapshot
from slurm_green.carbon.files import FileSource
from slurm_green.carbon.signal import CarbonSignal
from slurm_green.carbon.synthetic import SyntheticSource
from slurm_green.carbon.timebase import as_utc


def replayed_series(spec: str, start: float, end: float) -> pd.Series:
    """``spec``: ``synthetic``, a region of the shared data (``DE-LU``, ``GB``...), or a CSV path (``csv:PATH``)."""
    t0, t1 = as_utc(start).floor("h"), as_utc(end).ceil("h") + pd.Timedelta(hours=1)
    if spec == "synthetic":
        return SyntheticSource().history(t0, t1)
    regions = carbon_files()
    path = regions.get(spec) or Path(spec.removeprefix("csv:"))
    if not path.exists():
        raise ValueError(f"carbon {spec!r}: not 'synthetic', a region of {sorted(regions)} or a CSV file")
    return FileSource(path, replay=True).history(t0, t1)


def replayed_signal(spec: str, start: float, end: float) -> CarbonSignal:
    return CarbonSignal.from_series(replayed_series(spec, start, end))


class SimCarbonFeed:
    """The controller's ``CarbonFeed`` in simulation: the replayed series from now to now + horizon.

    The window is a view of the precomputed arrays (no pandas per tick), which keeps
    per-job window searches proportional to the horizon, not to the whole year.
    """

    def __init__(self, signal: CarbonSignal, name: str, horizon_s: float = 7 * 86400.0) -> None:
        self.full = signal
        self.name = name
        self.horizon_s = horizon_s

    def snapshot(self, now: float | None = None) -> CarbonSnapshot:
        full = self.full
        now = full.start if now is None else now
        lo = max(0, int(np.searchsorted(full.starts, now, side="right")) - 1)
        hi = int(np.searchsorted(full.starts, now + self.horizon_s, side="right")) + 1
        window = CarbonSignal(full.starts[lo:hi], full.values[lo:hi], full.step, full._cumulative[lo:hi])
        return CarbonSnapshot(window, self.name, synthetic=self.name == "synthetic", fetched_at=now)
