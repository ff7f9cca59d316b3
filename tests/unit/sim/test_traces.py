import numpy as np
import pytest

from slurm_green.carbon.datasets import shared_data_dir
from slurm_green.sim.traces import TraceWarning, load_trace, pollux_samples_to_target

TRACES = shared_data_dir() / "job_traces"
pytestmark = pytest.mark.skipif(not TRACES.exists(), reason=f"shared traces not found at {TRACES} (SLURM_GREEN_DATA)")


def test_philly_has_every_job_with_duration_and_gpus():
    w = load_trace(TRACES / "philly_pollux_jobs.csv")
    assert len(w) == 82247
    assert np.isnan(w.work).all() and (w.duration_s > 0).all()
    assert (w.gpus == 1).sum() == 76627  # as PROVENANCE.md counts (its list of larger sizes is partial)


def test_gavel_sizes_are_steps_of_named_job_types():
    w = load_trace(TRACES / "gavel_philly_ee9e8c_seed0.trace")
    assert len(w) == 2000 and np.isfinite(w.work).all()
    assert all("batch size" in t or t.startswith(("CycleGAN", "A3C")) for t in set(w.job_type))


def test_pollux_sizes_come_from_the_validation_runs():
    w = load_trace(TRACES / "pollux_workloads" / "workload-1.csv")
    assert len(w) == 160 and set(w.job_type) <= {"cifar10", "imagenet", "deepspeech2", "ncf", "bert", "yolov3"}
    # cifar10 at total batch 2048 reached its target at iteration 3178 in validation-2048.csv.
    assert pollux_samples_to_target("cifar10", 2048) == 3178 * 2048


def test_alibaba_keeps_gpu_tasks_only():
    # One GPU task ends as it is created; it is dropped, and the reader says so.
    with pytest.warns(TraceWarning, match=r"dropped 1 of 7064 rows: 1 with a duration of 0 or less"):
        w = load_trace(TRACES / "alibaba_openb_pod_list_default.csv")
    assert 0 < len(w) <= 8152 - 1088 and (w.gpus >= 1).all()
