"""The controller reads a job's progress report only from a plain file its own user wrote."""

from __future__ import annotations

import getpass
import logging
import os
import subprocess
import sys

import pytest

from slurm_green.controller.progress import ProgressReader, uid_of
from slurm_green.core import progress
from slurm_green.core.progress import JobProgress
from slurm_green.train.progress import write

NOW = 1_790_000_000.0
ME = getpass.getuser()
RECORD = JobProgress(42, "samples", 1280.0, 64.0, 0.25, NOW - 10)


def reader(tmp_path, uid: int | None = None) -> ProgressReader:
    return ProgressReader(tmp_path, uid=lambda user: os.getuid() if uid is None else uid)


def test_the_job_users_own_report_is_read(tmp_path) -> None:
    write(tmp_path, RECORD)
    assert reader(tmp_path).read(42, ME, NOW) == RECORD
    assert reader(tmp_path).read(43, ME, NOW) is None       # no report yet: no warning either
    assert uid_of(ME) == os.getuid() and uid_of("no-such-user-\udcff") is None


def test_a_report_owned_by_another_user_is_ignored(tmp_path, caplog) -> None:
    write(tmp_path, RECORD)
    with caplog.at_level(logging.WARNING):
        assert reader(tmp_path, uid=os.getuid() + 1).read(42, "bob", NOW) is None
    assert "not to the job's user 'bob'" in caplog.text
    assert ProgressReader(tmp_path, uid=lambda user: None).read(42, "ghost", NOW) is None


def test_links_fifos_and_hard_links_are_not_followed(tmp_path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    target = write(other, RECORD)
    os.symlink(target, tmp_path / "42.progress.json")
    os.link(target, tmp_path / "43.progress.json")
    os.mkfifo(tmp_path / "44.progress.json")
    (tmp_path / "45.progress.json").mkdir()
    for job in (42, 43, 44, 45):
        assert reader(tmp_path).read(job, ME, NOW) is None   # and the FIFO did not block


def test_garbage_oversized_wrong_job_and_future_reports_are_ignored(tmp_path, caplog) -> None:
    (tmp_path / "50.progress.json").write_bytes(b"caf\xe9 \xff")
    (tmp_path / "51.progress.json").write_bytes(progress.encode(RECORD) + b" " * progress.MAX_BYTES)
    (tmp_path / "52.progress.json").write_bytes(progress.encode(RECORD))   # says job 42
    write(tmp_path, JobProgress(53, "steps", 1, 1, 0, NOW + 3600))
    with caplog.at_level(logging.WARNING):
        assert all(reader(tmp_path).read(job, ME, NOW) is None for job in (50, 51, 52, 53))
    assert caplog.text.count("progress report ignored") == 4


def test_a_bad_report_read_every_tick_is_warned_about_once_per_reason(tmp_path, caplog) -> None:
    the_reader = reader(tmp_path)
    path = tmp_path / "50.progress.json"
    with caplog.at_level(logging.WARNING):
        for contents in (b"garbage", b"garbage", b"garbage", b"other garbage\xff", b"garbage"):
            path.write_bytes(contents)
            assert the_reader.read(50, ME, NOW) is None
        assert caplog.text.count("progress report ignored") == 3   # a new reason is said again
        write(tmp_path, JobProgress(50, "steps", 1, 1, 0, NOW))
        assert the_reader.read(50, ME, NOW) is not None
        path.unlink()
        path.write_bytes(b"garbage")
        assert the_reader.read(50, ME, NOW) is None
    assert caplog.text.count("progress report ignored") == 4       # after a good one, said again


def test_the_controller_side_never_imports_the_training_helper() -> None:
    code = ("import sys, slurm_green.controller.progress, slurm_green.controller.tick; "
            "sys.exit(any(m.startswith('slurm_green.train') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0 or uid_of("nobody") is None, reason="needs root to give a file away")
def test_the_real_owner_decides_with_the_systems_user_table(tmp_path) -> None:
    path = write(tmp_path, RECORD)
    real = ProgressReader(tmp_path)
    assert real.read(42, "nobody", NOW) is None        # root's file is not nobody's report
    os.chown(path, uid_of("nobody"), -1)
    assert real.read(42, "nobody", NOW) == RECORD
    assert real.read(42, "root", NOW) is None


def aged(path, seconds: float) -> None:
    os.utime(path, (NOW - seconds, NOW - seconds), follow_symlinks=False)


def test_reports_of_ended_jobs_are_removed_once_old_and_nothing_else(tmp_path) -> None:
    ended, fresh, active = (write(tmp_path, JobProgress(job, "samples", 1, 1, 0, NOW)) for job in (5, 6, 7))
    other = tmp_path / "notes.txt"
    other.write_text("a user's file")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-target"
    elsewhere.write_text("not the controller's to remove")
    link = tmp_path / "8.progress.json"
    os.symlink(elsewhere, link)
    for path in (ended, active, other, link):
        aged(path, 2 * 3600)
    aged(fresh, 60)   # ended a minute ago: kept for now
    sweeper = reader(tmp_path)
    assert sweeper.forget_ended({7}, NOW) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["6.progress.json", "7.progress.json", "notes.txt"]
    assert elsewhere.read_text() == "not the controller's to remove"   # the link went, not its target
    aged(fresh, 2 * 3600)
    assert sweeper.forget_ended({7}, NOW + 60) == 0      # at most once per sweep_every_s
    assert sweeper.forget_ended({7}, NOW + 600) == 1


def test_a_sweep_it_may_not_do_is_logged_once_and_changes_nothing(tmp_path, caplog) -> None:
    sweeper = ProgressReader(tmp_path / "missing", uid=lambda user: os.getuid(), sweep_every_s=0)
    with caplog.at_level(logging.WARNING):
        assert sweeper.forget_ended(set(), NOW) == 0
        assert sweeper.forget_ended(set(), NOW + 1) == 0
    assert caplog.text.count("should belong to the controller's user") == 1
