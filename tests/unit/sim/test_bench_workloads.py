"""Generated workloads for the robustness benchmark: resampled windows and scaled arrivals."""

import numpy as np
import pytest

from sim_literals import HOUR, LinearModels, workload
from slurm_green.sim.bench import offered_load
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import TraceOptions

TRACE = workload(*[(3 * HOUR * i, 1 + i % 4, (1 + i) * HOUR) for i in range(20)])


def test_a_resample_is_a_window_with_jobs_redrawn_from_it_and_the_same_for_the_same_seed():
    a, b, c = TRACE.resampled(8, seed=1), TRACE.resampled(8, seed=1), TRACE.resampled(8, seed=2)
    assert len(a) == 8 and a.name == "test-s1"
    assert np.array_equal(a.submit, b.submit) and np.array_equal(a.work, b.work)
    first = int(np.flatnonzero(TRACE.submit == a.submit[0])[0])
    assert np.array_equal(a.submit, TRACE.submit[first: first + 8])  # the window's own arrivals
    window_jobs = set(zip(TRACE.gpus[first: first + 8].tolist(), TRACE.work[first: first + 8].tolist()))
    assert set(zip(a.gpus.tolist(), a.work.tolist())) <= window_jobs  # jobs drawn from that window
    assert not (np.array_equal(a.submit, c.submit) and np.array_equal(a.work, c.work))
    assert len(TRACE.resampled(100, seed=0)) == len(TRACE)
    with pytest.raises(ValueError, match="positive"):
        TRACE.resampled(0, seed=0)


def test_scaled_arrivals_multiply_the_offered_load():
    spec, models, options = ClusterSpec(nodes=1, gpus_per_node=4), LinearModels(), TraceOptions()
    # Linear model: runtime at the request = work / GPUs, so the asked GPU-time is the work itself.
    asked = float(TRACE.work.sum())
    span = float(TRACE.submit[-1] - TRACE.submit[0])
    assert offered_load(TRACE, spec, models, options) == pytest.approx(asked / (4 * span))
    faster = TRACE.arrivals_scaled(2.0)
    assert faster.submit[0] == TRACE.submit[0] and faster.submit[-1] - faster.submit[0] == pytest.approx(span / 2)
    assert offered_load(faster, spec, models, options) == pytest.approx(2 * offered_load(TRACE, spec, models, options))
    # All at once: measured over the mean runtime instead of a zero span.
    burst = workload((0.0, 2, 4 * HOUR), (0.0, 2, 8 * HOUR))
    assert offered_load(burst, spec, models, options) == pytest.approx(12 * HOUR / (4 * 3 * HOUR))
    with pytest.raises(ValueError, match="positive"):
        TRACE.arrivals_scaled(0.0)
