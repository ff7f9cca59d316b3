"""The simulator plays job_submit.lua and the Prolog with their own rules, so it cannot drift from them.

Each case hands the same input to the real rule (``gpu.enact.decided_cap``, which the Prolog
runs; ``green_options.on_arrival``, which tests/unit/job_submit holds the Lua to) and to the
simulator, and compares what comes out.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sim_literals import LinearModels, flat_signal, workload

from slurm_green.core import decision_token
from slurm_green.core.cluster import Job
from slurm_green.core.green_options import GreenOptions, format_marker, on_arrival
from slurm_green.gpu.enact import decided_cap
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import Simulator, TraceOptions

KEY = b"0123456789abcdef-sim-rules-key"
NODE = ClusterSpec(nodes=1, gpus_per_node=4)


def _sim(options: TraceOptions = TraceOptions(), submit_s: float = 0.0) -> Simulator:
    return Simulator(workload((submit_s, 2, 3600.0)), NODE, LinearModels(), flat_signal(), KEY, options)


@pytest.mark.parametrize("payload", [{"cap": 0.7}, {"cap": 1}, {"gpus": 2}, {"cap": 0.01}, {"cap": 0},
                                     {"cap": -0.5}, {"cap": 1.5}, {"cap": True}, {"cap": "0.5"}])
@pytest.mark.parametrize("signed_for", [1, 2])
@pytest.mark.parametrize("tres_freq", ["", "gpu:medium"])
def test_the_simulated_prolog_caps_a_job_as_the_prolog_does(tmp_path, payload, signed_for, tres_freq):
    key_file = tmp_path / "decision.key"
    key_file.write_bytes(KEY)
    key_file.chmod(0o600)  # a key every user could read is refused
    comment = f"note {decision_token.sign(KEY, signed_for, payload)}"
    prolog = decided_cap(comment, 1, key_file, None, lambda line: None)
    clocks = 0.7 if tres_freq else 1.0  # what Slurm's --gpu-freq level stands for
    expected = clocks if prolog is None else min(clocks, prolog)
    assert _sim()._prolog_cap(Job(1, comment=comment, tres_freq=tres_freq)) == expected


@pytest.mark.parametrize("flex_s", [0.0, 0.4, 1.0, 6 * 3600.0])
@pytest.mark.parametrize("submit_s", [0.0, 0.5])
def test_the_simulated_plugin_marks_and_defers_an_arrival_as_the_plugin_does(flex_s, submit_s):
    sim = _sim(TraceOptions(flex_s=flex_s, gpu_range=2.0), submit_s)
    sim._arrive(0)
    job = sim.snapshot().jobs[0]
    options, begin = on_arrival(GreenOptions(max_delay_s=flex_s, gpus_min=1, gpus_max=4), job.submit_time,
                                time_limit_s=job.time_limit_s)  # a trace job is submitted with its limit
    assert (job.admin_comment, job.eligible_time) == (format_marker(options), begin)
    assert begin is None or (begin == math.floor(job.submit_time + flex_s) and begin > job.submit_time)


def test_an_unmanaged_arrival_gets_no_marker_and_no_deferral():
    sim = _sim(TraceOptions(managed=False))
    sim._arrive(0)
    job = sim.snapshot().jobs[0]
    assert job.admin_comment == "" and job.eligible_time is None and np.isfinite(job.submit_time)
