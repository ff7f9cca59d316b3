"""Replay a past period of data onto any other time, keeping hour-of-week alignment.

For demos and simulation a recorded year is mapped onto "now" by shifting it
by a whole number of weeks, so Monday 09:00 UTC in the data stays Monday 09:00
UTC in the replay and weekly patterns survive. The data is treated as a loop of
``floor(span / 1 week)`` weeks (52 for a year; the last day or so is unused);
where the loop wraps (late December to early January) the values jump, as they
would between two recorded years.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slurm_green.carbon.errors import GapError
from slurm_green.carbon.timebase import floor_on

ONE_WEEK = pd.Timedelta(weeks=1)


def replay_window(recorded: pd.Series, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
    """Values of ``recorded`` (regular, UTC) replayed onto the periods in ``[start, end)``."""
    step = pd.Timedelta(recorded.index.freq or pd.Series(recorded.index).diff().median())
    weeks = (recorded.index[-1] + step - recorded.index[0]) // ONE_WEEK
    if weeks < 1:
        raise GapError("replay needs at least one whole week of data")
    loop_len = int(weeks * ONE_WEEK / step)
    first = floor_on(start, step, recorded.index[0])
    # Stamps on the data's own grid, so the loop offset is a whole number of steps.
    grid = pd.date_range(first, max(end, first + step) - pd.Timedelta(1), freq=step)
    position = ((grid - recorded.index[0]) // step) % loop_len
    values = recorded.to_numpy()[np.asarray(position, dtype=np.int64)]
    out = pd.Series(values, index=grid, name="gco2_per_kwh")
    out.index.freq = step
    return out
