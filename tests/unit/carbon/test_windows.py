"""Low-carbon windows are the runs at or below the lower quartile."""

from __future__ import annotations

import pandas as pd

from slurm_green.carbon.windows import low_carbon_windows


def test_runs_of_low_values_become_half_open_windows():
    index = pd.date_range("2024-01-01", periods=8, freq="h", tz="UTC")
    series = pd.Series([300, 100, 100, 300, 300, 300, 90, 300], index=index, dtype=float)
    series.index.freq = "h"
    assert low_carbon_windows(series) == [(index[1], index[3]), (index[6], index[7])]
    assert low_carbon_windows(series.iloc[:0]) == []
