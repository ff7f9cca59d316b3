import math
from pathlib import Path

import numpy as np
import pytest
from sim_literals import LinearModels

from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import Simulator, TraceOptions
from slurm_green.sim.sacct import gpus_of, load_sacct
from slurm_green.sim.traces import TraceError, TraceWarning

FIXTURES = Path(__file__).resolve().parents[1] / "slurm" / "fixtures"
#: The fewest columns a replay needs, as an admin would ask sacct for them.
HEADER = "JobID|Submit|Start|Elapsed|AllocTRES"


def capture(tmp_path: Path, *lines: str, header: str = HEADER) -> Path:
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def test_gpu_counts_from_tres():
    assert gpus_of("billing=8,cpu=8,gres/gpu=2,mem=32000M,node=1", "") == 2
    assert gpus_of("cpu=1,gres/gpu:a100=4", "") == 4
    assert gpus_of("", "cpu=2,gres/shard=4") == 1
    assert gpus_of("cpu=1,mem=4000M", "cpu=1") == 0


@pytest.mark.parametrize("version", ["24.11", "22.05", "26.05"])
@pytest.mark.parametrize("form", ["sacct.txt", "sacct.json"])
def test_real_sacct_captures_give_the_gpu_jobs_that_ran(version, form):
    path = FIXTURES / version / form
    if not path.exists():
        pytest.skip(f"no {form} capture for {version}")
    w = load_sacct(path).workload
    # Whole jobs that started on GPUs: steps, CPU-only and pending jobs are left out.
    assert w.job_type == ("resnet-gpu2", "bert-shard", "llm-ddp", "array-sweep")
    assert w.gpus.tolist() == [2, 1, 8, 1] and (w.duration_s > 0).all()


def test_the_24_11_capture_in_detail_text_and_json_agree():
    text, js = FIXTURES / "24.11" / "sacct.txt", FIXTURES / "24.11" / "sacct.json"
    if not (text.exists() and js.exists()):
        pytest.skip("no 24.11 sacct capture")
    from_text, from_json = load_sacct(text), load_sacct(js)
    # Read off the capture: jobs 4 (gres/gpu=2, 2 h), 5 (gres/shard, 1 h), 6 (gres/gpu=8, 12 h), 15_0 (20 min).
    assert from_text.workload.duration_s.tolist() == from_json.workload.duration_s.tolist() == [24.0, 24.0, 23.0, 21.0]
    assert from_text.time_limit_s.tolist() == from_json.time_limit_s.tolist() == [7200.0, 3600.0, 43200.0, 1200.0]
    assert np.array_equal(from_text.workload.submit, from_json.workload.submit)  # sacct's local time was UTC


def test_neither_jobname_nor_reqtres_is_needed(tmp_path):
    w = load_sacct(capture(tmp_path, "7|2025-01-01T00:00:00|2025-01-01T00:01:00|01:00:00|gres/gpu=4")).workload
    assert w.gpus.tolist() == [4] and w.duration_s.tolist() == [3600.0] and w.job_type == ("",)


def test_a_capture_without_the_needed_columns_names_them(tmp_path):
    with pytest.raises(TraceError, match=r"missing Elapsed, AllocTRES or ReqTRES"):
        load_sacct(capture(tmp_path, header="JobID|Submit|Start"))


def test_a_line_with_extra_fields_is_skipped_and_named(tmp_path):
    path = capture(tmp_path, "1|2025-01-01T00:00:00|2025-01-01T00:01:00|01:00:00|gres/gpu=1",
                   "2|2025-01-01T00:00:00|2025-01-01T00:01:00|01:00:00|gres/gpu=1|a|b",
                   "3|2025-01-01T00:00:00|2025-01-01T00:01:00|02:00:00|gres/gpu=2")
    with pytest.warns(TraceWarning, match=r"skipped 1 line\(s\), expected 5 fields .*: line 3 has 7"):
        w = load_sacct(path).workload
    assert w.gpus.tolist() == [1, 2]


def test_a_bad_number_or_time_names_its_line_and_value(tmp_path):
    path = capture(tmp_path, "1|2025-01-01T00:00:00|2025-01-01T00:01:00|1:x0:00|gres/gpu=1",
                   "2|yesterday|2025-01-01T00:01:00|01:00:00|gres/gpu=1",
                   "3|2025-01-01T00:00:00|2025-01-01T00:01:00|02:00:00|gres/gpu=2")
    with pytest.warns(TraceWarning) as seen:
        w = load_sacct(path).workload
    messages = sorted(str(warning.message) for warning in seen)
    assert messages == ["sacct.txt: skipped 1 line(s), Elapsed not a Slurm duration ([D-]HH:MM:SS): line 2 ('1:x0:00')",
                        "sacct.txt: skipped 1 line(s), Submit not a time (YYYY-MM-DDTHH:MM:SS): line 3 ('yesterday')"]
    assert w.gpus.tolist() == [2]


def test_the_autumn_dst_night_in_berlin(tmp_path):
    # 02:05 happens twice on 2025-10-26 in Europe/Berlin: first in summer time (00:05 UTC), then 01:05 UTC.
    path = capture(tmp_path, "1|2025-10-26T02:05:00|2025-10-26T02:06:00|01:00:00|gres/gpu=1",
                   "2|2025-10-26T04:00:00|2025-10-26T04:01:00|01:00:00|gres/gpu=1")
    with pytest.warns(TraceWarning, match=r"1 submit time\(s\) in the hour a DST change repeats .* 0 in the hour"):
        w = load_sacct(path, tz="Europe/Berlin").workload
    assert w.submit.tolist() == [1761437100.0, 1761447600.0]  # 2025-10-26 00:05 and 03:00 UTC


def test_the_spring_dst_gap_moves_forward(tmp_path):
    path = capture(tmp_path, "1|2025-03-30T02:30:00|2025-03-30T03:06:00|01:00:00|gres/gpu=1")
    with pytest.warns(TraceWarning, match=r"0 submit time\(s\) .* 1 in the hour it skips"):
        w = load_sacct(path, tz="Europe/Berlin").workload
    assert w.submit.tolist() == [1743296400.0]  # 03:00 CEST = 01:00 UTC


def test_timelimit_is_read_and_gives_the_sites_own_factor(tmp_path):
    path = capture(tmp_path, "1|2025-01-01T00:00:00|2025-01-01T00:01:00|01:00:00|gres/gpu=1|04:00:00",
                   "2|2025-01-01T00:00:00|2025-01-01T00:01:00|02:00:00|gres/gpu=1|UNLIMITED",
                   "3|2025-01-01T00:00:00|2025-01-01T00:01:00|1-00:00:00|gres/gpu=1|2-00:00:00",
                   header=f"{HEADER}|Timelimit")
    history = load_sacct(path)
    assert np.array_equal(history.time_limit_s, [4 * 3600.0, np.nan, 2 * 86400.0], equal_nan=True)
    assert history.time_limit_factor() == 3.0  # the median of 4 and 2
    without = load_sacct(capture(tmp_path, "1|2025-01-01T00:00:00|2025-01-01T00:01:00|01:00:00|gres/gpu=1"))
    assert without.time_limit_factor() is None


def test_json_that_is_not_sacct_is_refused(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"nodes": []}')
    with pytest.raises(TraceError, match="no 'jobs' list"):
        load_sacct(path)


def test_each_job_keeps_its_own_limit_and_a_job_stopped_at_its_limit_keeps_what_it_ran(tmp_path):
    """The replay backfills by each job's own Timelimit, as Slurm did; one factor for all would
    give a 10-minute job with a 2-day limit the same slack as every other job."""
    path = tmp_path / "h.txt"
    path.write_text("JobID|Submit|Start|Elapsed|Timelimit|AllocTRES\n"
                    "1|2025-01-01T00:00:00|2025-01-01T00:00:00|00:10:00|2-00:00:00|gres/gpu=1\n"
                    "2|2025-01-01T00:01:00|2025-01-01T00:01:00|01:00:30|01:00:00|gres/gpu=1\n"
                    "3|2025-01-01T00:02:00|2025-01-01T00:02:00|01:00:00||gres/gpu=1\n")
    history = load_sacct(path)
    # job 2 was stopped at its hour and ran 30 s past it (KillWait): its limit is what it ran
    assert np.array_equal(history.workload.time_limit_s, [2 * 86400.0, 3630.0, np.nan], equal_nan=True)
    engine = Simulator(history.workload, ClusterSpec(nodes=1, gpus_per_node=4), LinearModels(), None, b"k" * 16,
                       TraceOptions(time_limit_factor=history.time_limit_factor() or 1.5))
    # the job without a limit gets its runtime x the median of the others' ratios (288 and 1)
    assert engine.time_limit.tolist() == [2 * 86400.0, 3630.0, math.ceil(3600 * 144.5 / 60) * 60]
