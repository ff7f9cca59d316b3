"""Low-carbon windows: the contiguous stretches of a forecast in its cleanest quarter.

Used by displays (``carbon show`` and its plot) to mark when to run work; the
policy itself uses :meth:`CarbonSignal.best_start`, which is exact.
"""

from __future__ import annotations

import pandas as pd


def low_carbon_windows(series: pd.Series, quantile: float = 0.25) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """``[start, end)`` of each run of periods at or below the ``quantile`` of ``series``."""
    if series.empty:
        return []
    step = pd.Timedelta(series.index.freq or pd.Series(series.index).diff().median() or pd.Timedelta(hours=1))
    low = series <= series.quantile(quantile)
    runs = (low != low.shift()).cumsum()[low]
    return [(group.index[0], group.index[-1] + step) for _, group in runs.groupby(runs)]
