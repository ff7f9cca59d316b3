"""The job's side of progress reports: where they go, whole files, rate limits, never a crash."""

from __future__ import annotations

import os
import stat

from slurm_green.core import progress
from slurm_green.train.progress import ProgressReporter, progress_dir, write


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_directory_comes_from_the_environment_else_the_node_settings(tmp_path) -> None:
    conf = tmp_path / "gpu.conf"
    conf.write_text("SLURM_GREEN_TELEMETRY_DIR=/srv/telemetry\n")
    assert str(progress_dir({"SLURM_GREEN_PROGRESS_DIR": "/x", "SLURM_GREEN_GPU_CONF": str(conf)})) == "/x"
    assert str(progress_dir({"SLURM_GREEN_GPU_CONF": str(conf)})) == "/srv/telemetry/progress"
    assert progress_dir({"SLURM_GREEN_GPU_CONF": str(tmp_path / "missing.conf")}) is None


def test_the_reporter_writes_the_rate_since_its_last_report_at_most_every_interval(tmp_path) -> None:
    clock = Clock()
    reporter = ProgressReporter(tmp_path, 42, every_s=30, clock=clock)
    assert reporter.update(0) is None                     # starts the clock
    clock.now += 10
    assert reporter.update(100) is None                   # too soon
    clock.now += 30
    path = reporter.update(400, frozen=0.4)
    assert path == tmp_path / "42.progress.json"
    record = progress.decode(path.read_bytes(), 42)
    assert (record.done, record.per_s, record.frozen, record.time) == (400, 10.0, 0.4, clock.now)
    clock.now += 5
    assert reporter.update(450, force=True) is not None   # a checkpoint may force one
    assert progress.decode(path.read_bytes(), 42).per_s == 10.0
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["42.progress.json"]   # no temporary file left


def test_a_checkpoint_is_reported_at_once_and_carried_by_later_reports(tmp_path) -> None:
    clock = Clock()
    reporter = ProgressReporter(tmp_path, 42, every_s=30, clock=clock)
    path = tmp_path / "42.progress.json"
    clock.now += 1
    assert reporter.update(0, checkpointed=True) == path      # even the first call: the controller waits for it
    record = progress.decode(path.read_bytes(), 42)
    assert (record.checkpoint, record.time, record.per_s, reporter.checkpoint_time) == (clock.now, clock.now, 0, clock.now)
    first = clock.now
    clock.now += 40
    assert reporter.update(400) == path                       # a plain report keeps the checkpoint's time
    record = progress.decode(path.read_bytes(), 42)
    assert (record.checkpoint, record.per_s) == (first, 10.0)
    clock.now += 2                                            # a checkpoint right after a report, nothing new:
    assert reporter.update(400, checkpointed=True) == path    # written though every_s has not passed,
    record = progress.decode(path.read_bytes(), 42)
    assert (record.checkpoint, record.time, record.per_s) == (clock.now, clock.now, 10.0)   # the last rate kept
    clock.now += 28                                           # the rate's window still starts at the last new units
    assert progress.decode(reporter.update(700).read_bytes(), 42).per_s == 10.0


def test_a_checkpoint_report_that_fails_is_carried_by_the_next(tmp_path) -> None:
    clock = Clock()
    reporter = ProgressReporter(tmp_path / "later", 42, every_s=30, clock=clock)
    reporter.update(0)
    clock.now += 5
    assert reporter.update(50, checkpointed=True) is None     # the directory is not there yet
    at = clock.now
    (tmp_path / "later").mkdir()
    clock.now += 30
    assert progress.decode(reporter.update(350).read_bytes(), 42).checkpoint == at


def test_without_a_directory_or_a_job_id_it_does_nothing(tmp_path) -> None:
    assert not ProgressReporter.from_environment({"SLURM_GREEN_PROGRESS_DIR": str(tmp_path)}).enabled
    reporter = ProgressReporter.from_environment({"SLURM_GREEN_PROGRESS_DIR": str(tmp_path), "SLURM_JOB_ID": "7"})
    assert reporter.enabled and reporter.job_id == 7
    assert ProgressReporter(None, 7).update(1, force=True) is None
    assert ProgressReporter(None, 7).update(1, checkpointed=True) is None


def test_a_write_that_fails_is_logged_once_and_training_goes_on(tmp_path, caplog) -> None:
    clock = Clock()
    reporter = ProgressReporter(tmp_path / "gone", 42, every_s=1, clock=clock)
    reporter.update(0)
    for done in (10, 20):
        clock.now += 2
        assert reporter.update(done) is None
    assert sum("cannot write progress" in r.message for r in caplog.records) == 1


def test_write_replaces_the_whole_file(tmp_path) -> None:
    first = progress.JobProgress(3, "steps", 1, 1, 0, 1)
    second = progress.JobProgress(3, "steps", 2, 1, 0, 2)
    write(tmp_path, first)
    write(tmp_path, second)
    assert progress.decode((tmp_path / "3.progress.json").read_bytes(), 3) == second


def test_the_total_the_loop_knows_is_in_every_report(tmp_path) -> None:
    clock = Clock()
    reporter = ProgressReporter(tmp_path, 42, every_s=30, clock=clock, total=1000)
    reporter.update(0)
    clock.now += 40
    record = progress.decode(reporter.update(400).read_bytes(), 42)
    assert (record.total, record.time_left_s(clock.now)) == (1000, 60.0)
    reporter.total = 2000                                    # a loop that learns its length later
    clock.now += 40
    assert progress.decode(reporter.update(800).read_bytes(), 42).total == 2000
