"""When a run would be stopped at its partition's MaxTime: read as the planner sets limits."""

from __future__ import annotations

import math

import pytest

from slurm_green.core.time_limit import outruns_max_time


@pytest.mark.parametrize(("run_s", "asked_s", "max_time_s", "stopped"), [
    (7200.0, 3600.0, 7200.0, False),  # raised to exactly MaxTime: allowed
    (7200.5, 3600.0, 7200.0, True),  # 121 whole minutes
    (7200.0 + 1e-8, 3600.0, 7200.0, False),  # a float's rounding above a whole minute adds none
    (9000.0, 9000.0, 7200.0, False),  # no longer than the limit it was submitted with (over MaxTime already)
    (9060.0, 9000.0, 7200.0, True),  # one minute longer than that
    (1e9, 3600.0, None, False),  # no MaxTime
    (1e9, None, 7200.0, False),  # no known limit: nothing to raise
    (math.inf, 3600.0, 7200.0, False),  # no finite run: no raise either
    (None, 3600.0, 7200.0, False),
])
def test_a_run_is_stopped_only_above_both_max_time_and_the_limit_it_had(run_s, asked_s, max_time_s, stopped):
    assert outruns_max_time(run_s, asked_s, max_time_s) is stopped
