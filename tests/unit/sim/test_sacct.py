from pathlib import Path

import pytest

from slurm_green.sim.sacct import gpus_of, load_sacct, parse_elapsed

FIXTURES = Path(__file__).resolve().parents[1] / "slurm" / "fixtures"


def test_elapsed_formats():
    assert parse_elapsed("1-02:03:04") == 86400 + 2 * 3600 + 3 * 60 + 4
    assert parse_elapsed("05:06") == 5 * 60 + 6
    assert parse_elapsed("00:00:09") == 9


def test_gpu_counts_from_tres():
    assert gpus_of("billing=8,cpu=8,gres/gpu=2,mem=32000M,node=1", "") == 2
    assert gpus_of("cpu=1,gres/gpu:a100=4", "") == 4
    assert gpus_of("", "cpu=2,gres/shard=4") == 1
    assert gpus_of("cpu=1,mem=4000M", "cpu=1") == 0


@pytest.mark.parametrize("version", ["24.11", "22.05"])
def test_real_sacct_capture_gives_the_gpu_jobs_that_ran(version):
    path = FIXTURES / version / "sacct.txt"
    if not path.exists():
        pytest.skip(f"no sacct capture for {version}")
    w = load_sacct(path)
    # Whole jobs that started on GPUs: steps, CPU-only and pending jobs are left out.
    assert len(w) >= 1 and (w.gpus >= 1).all() and (w.duration_s > 0).all()
    assert "batch" not in w.job_type


def test_the_24_11_capture_in_detail():
    path = FIXTURES / "24.11" / "sacct.txt"
    if not path.exists():
        pytest.skip("no 24.11 sacct capture")
    w = load_sacct(path)
    # Read off the capture: jobs 4 (gres/gpu=2), 5 (gres/shard), 6 (gres/gpu=8 over 2 nodes), 15_0 (gres/gpu=1).
    assert w.job_type == ("resnet-gpu2", "bert-shard", "llm-ddp", "array-sweep")
    assert w.gpus.tolist() == [2, 1, 8, 1]
    assert w.duration_s.tolist() == [24.0, 24.0, 23.0, 21.0]
