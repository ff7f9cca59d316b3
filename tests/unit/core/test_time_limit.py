"""When a run would be stopped at its partition's MaxTime: read as the planner sets limits."""

from __future__ import annotations

import math

import pytest

from slurm_green.core.cluster import ClusterSnapshot, Partition
from slurm_green.core.time_limit import outruns_max_time, partition_limits, partition_max_times


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


PARTITIONS = ClusterSnapshot(taken_at=0.0, partitions=(
    Partition("gpu", default_time_s=3600.0, max_time_s=7200.0, default=True),
    Partition("long", default_time_s=4 * 3600.0, max_time_s=7 * 86400.0),
    Partition("free"),  # unlimited
))


def test_a_partition_list_is_bound_by_the_smallest_max_time_and_scaled_from_the_largest_default():
    """``sbatch -p gpu,long`` may start in either: a raise must fit both, and a limit scaled
    from the default must not be short in either."""
    max_times, limits = partition_max_times(PARTITIONS), partition_limits(PARTITIONS)
    assert max_times.get("gpu,long") == 7200.0 and limits.get("gpu,long") == 4 * 3600.0
    assert max_times.get("long,free") == 7 * 86400.0  # the unlimited one bounds nothing
    assert max_times.get("free") is None and max_times.get("free,free") is None
    assert max_times.get("gpu,elsewhere") == 7200.0  # a partition this snapshot does not know is left out
    assert max_times.get("elsewhere,nowhere") is None and "elsewhere" not in max_times
    assert limits.get("") == 3600.0 and set(partition_limits(PARTITIONS)) == {"gpu", "long", "free", ""}
