"""Carbon for a simulation: a recorded series replayed over the trace's span, and the feed a tick reads.

The carbon layer does the reading and the replay (``FileSource(..., replay=True)``:
a recorded year is mapped onto any time keeping the hour of the week), and the
spec syntax is the carbon layer's too: what ``carbon show`` and the controller's
config accept, ``simulate --carbon`` accepts. The policy
sees a perfect forecast (the replayed future), as ``FileSource`` does by default in
replay; accounting uses the same series.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slurm_green.carbon.datasets import carbon_files
from slurm_green.carbon.errors import CarbonError
from slurm_green.carbon.feed import CarbonSnapshot
from slurm_green.carbon.files import FileSource
from slurm_green.carbon.signal import CarbonSignal
from slurm_green.carbon.source import CarbonSource
from slurm_green.carbon.spec import parse_source_spec, split_spec
from slurm_green.carbon.timebase import as_utc

#: Source kinds a simulation can use: recorded or made-up series, not live APIs (they know only today).
RECORDED_KINDS = ("csv", "synthetic")


def replayed_series(spec: str, start: float, end: float) -> pd.Series:
    """The intensity over ``[start, end]`` (epoch seconds), whole hours around it.

    ``spec``: a region of the shared data (``DE-LU``, ``GB``...) or a source spec in the
    syntax the controller and ``carbon`` use (``synthetic``, ``csv:PATH?tz=...&unit=...``).
    A CSV is replayed onto the trace's times unless the spec says ``replay=0`` (a trace
    recorded inside the file's period). Every problem is a ``ValueError`` naming the spec.
    """
    t0, t1 = as_utc(start).floor("h"), as_utc(end).ceil("h") + pd.Timedelta(hours=1)
    regions = carbon_files()
    try:
        if spec in regions:
            return FileSource(regions[spec], replay=True, name=spec).history(t0, t1)
        return simulation_source(spec, sorted(regions)).history(t0, t1)
    except CarbonError as exc:
        raise ValueError(f"carbon {spec!r}: {exc}") from None


def simulation_source(spec: str, regions: list[str]) -> CarbonSource:
    """``spec`` as a source for a simulation: a CSV replayed by default, or ``synthetic``."""
    kind, arg, options = split_spec(spec)
    if kind not in RECORDED_KINDS:
        raise ValueError(f"carbon {spec!r}: a simulation needs recorded data: a region of {regions}, "
                         "csv:PATH[?options] or synthetic")
    if kind == "csv" and "replay" not in options:
        spec = f"{spec.strip()}{'&' if options else '?'}replay=1"
    return parse_source_spec(spec)


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
