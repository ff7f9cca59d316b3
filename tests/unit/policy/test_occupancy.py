"""GPU-time per forecast period: what fits, counted in GPU-seconds on the forecast's grid."""

import numpy as np

from slurm_green.policy.occupancy import GpuTimeProfile

HOUR = 3600.0


def test_the_period_holding_now_has_only_what_is_left_of_it():
    profile = GpuTimeProfile.on_grid(now=1.5 * HOUR, grid_start=0.0, step=HOUR, gpus=8)
    assert profile.origin == HOUR
    # 8 GPUs from now for half an hour fill the rest of the period; a longer run needs the next one too
    assert profile.fits(np.array([1.5 * HOUR]), 0.5 * HOUR, 8).tolist() == [True]
    profile.commit(1.5 * HOUR, 0.5 * HOUR, 8)
    assert profile.fits(np.array([1.5 * HOUR, 2 * HOUR]), HOUR, 1).tolist() == [False, True]


def test_a_period_counts_gpu_time_not_gpus_at_each_instant():
    profile = GpuTimeProfile.on_grid(now=0.0, grid_start=0.0, step=HOUR, gpus=8)
    profile.commit(0.0, 1.5 * HOUR, 8)  # all GPUs until 01:30
    # 8 GPUs from 01:30 fit the second half of 01:00-02:00; from 01:00 (16 GPUs for half an hour) they do not
    assert profile.fits(np.array([HOUR, 1.5 * HOUR]), HOUR, 8).tolist() == [False, True]
    profile.commit(-HOUR, HOUR, 8)  # a commit before now starts now: 00:00-01:00 is now over-full
    assert profile.used[0] == 16 * HOUR


def test_the_earliest_room_is_the_first_run_of_periods_the_job_has_to_itself():
    profile = GpuTimeProfile.on_grid(now=0.0, grid_start=0.0, step=HOUR, gpus=8)
    profile.commit(0.0, 2 * HOUR, 8)
    profile.commit(2 * HOUR, HOUR, 4)
    profile.commit(4 * HOUR, HOUR, 8)
    assert profile.earliest_room(HOUR, 4) == 2 * HOUR  # 4 GPUs are left in 02:00-03:00
    assert profile.earliest_room(HOUR, 8) == 3 * HOUR
    assert profile.earliest_room(2 * HOUR, 8) == 5 * HOUR  # 03:00-04:00 alone is too short
    assert profile.earliest_room(0.5 * HOUR, 16) == 3 * HOUR  # more than the cluster: the first empty period
