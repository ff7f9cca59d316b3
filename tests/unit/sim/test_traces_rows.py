"""What the trace readers do with files that are not what they should be: say so, with counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_green.sim.traces import TraceError, TraceWarning, load_trace

PHILLY = "timestamp,duration,num_gpus\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_absurd_philly_rows_are_dropped_with_counts_by_reason(tmp_path):
    path = write(tmp_path, "philly_jobs.csv", PHILLY + "\n".join([
        "2017-10-09 07:01:55,66.0,1",
        "2017-10-09 07:02:55,1e12,1",      # 31,700 years
        "2017-10-09 07:03:55,NaN,2",
        "2017-10-09 07:04:55,abc,2",
        "not a time,60,1",
        "2017-10-09 07:05:55,60,0",
        "2017-10-09 07:06:55,-5,1",
        "2017-10-09 07:07:55,120,100000",  # kept: the simulator runs it on the whole cluster, and says so
    ]) + "\n")
    with pytest.warns(TraceWarning) as seen:
        w = load_trace(path)
    [message] = [str(warning.message) for warning in seen]
    assert message == ("philly_jobs.csv: dropped 6 of 8 rows: 3 with a missing or unreadable value, "
                       "1 asking for no GPUs, 1 with a duration of 0 or less, 1 longer than a year")
    assert w.duration_s.tolist() == [66.0, 120.0] and w.gpus.tolist() == [1, 100000]


def test_gpu_counts_no_job_has_are_dropped_not_changed(tmp_path):
    """1e30 would wrap in int64 and read as one GPU, 2.7 be cut to 2: another job than the trace's."""
    path = write(tmp_path, "philly_jobs.csv", PHILLY + "2017-10-09 07:01:55,66,1e30\n2017-10-09 07:02:55,66,2.7\n"
                                                      "2017-10-09 07:03:55,66,4\n")
    with pytest.warns(TraceWarning, match="dropped 2 of 3 rows: 2 asking for a fractional count of GPUs or over 1000000"):
        assert load_trace(path).gpus.tolist() == [4]


def test_a_philly_stamp_with_an_offset_is_the_instant_it_names(tmp_path):
    naive = load_trace(write(tmp_path, "philly_jobs.csv", PHILLY + "2017-10-09 07:01:55,66,1\n"))
    aware = load_trace(write(tmp_path, "philly_jobs.csv", PHILLY + "2017-10-09 09:01:55+02:00,66,1\n"))
    assert aware.submit.tolist() == naive.submit.tolist()


def test_a_pollux_batch_size_below_one_is_dropped(tmp_path):
    path = write(tmp_path, "workload-9.csv", "time,application,num_replicas,batch_size\n0,cifar10,1,0.5\n"
                                              "60,cifar10,1,128\n")
    with pytest.warns(TraceWarning, match="1 with a batch size below 1 or fractional"):
        assert len(load_trace(path)) == 1


def test_a_clean_trace_warns_nothing(tmp_path, recwarn):
    load_trace(write(tmp_path, "philly_jobs.csv", PHILLY + "2017-10-09 07:01:55,66.0,1\n"))
    assert not [w for w in recwarn if issubclass(w.category, TraceWarning)]


@pytest.mark.parametrize("text, reason", [
    ("", "empty file"),
    (PHILLY, "no jobs to replay"),
    ("when,how_long\n1,2\n", "missing column(s) timestamp, duration, num_gpus"),
])
def test_empty_or_foreign_files_are_one_clear_error(tmp_path, text, reason):
    with pytest.raises(TraceError) as raised:
        load_trace(write(tmp_path, "philly_jobs.csv", text))
    assert reason in str(raised.value) and "philly_jobs.csv" in str(raised.value)


def test_every_row_dropped_is_no_jobs(tmp_path):
    with pytest.warns(TraceWarning), pytest.raises(TraceError, match="no jobs to replay"):
        load_trace(write(tmp_path, "philly_jobs.csv", PHILLY + "2017-10-09 07:01:55,0,1\n"))


def test_an_unknown_file_name_lists_what_is_known(tmp_path):
    with pytest.raises(TraceError, match=r"unknown trace .*Philly CSV.*Gavel \.trace.*whatif"):
        load_trace(write(tmp_path, "jobs.csv", PHILLY))


def test_gavel_rows_without_steps_or_gpus_are_counted(tmp_path):
    rows = ["ResNet-18 (batch size 64)\tcmd\tx\t1\t1000\t0\t1",
            "ResNet-18 (batch size 64)\tcmd\tx\t1\t-1\t10\t1",
            "ResNet-18 (batch size 64)\tcmd\tx\t1\t1000\t20\t0"]
    with pytest.warns(TraceWarning, match=r"dropped 2 of 3 rows: 1 asking for no GPUs, 1 with a step count of 0"):
        w = load_trace(write(tmp_path, "x.trace", "\n".join(rows) + "\n"))
    assert w.work.tolist() == [1000.0]
