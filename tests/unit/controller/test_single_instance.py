"""One controller per state database (``controller/single_instance.py``), with real processes
and the kernel's own ``flock``: the holder is another process, as a running service would be."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from slurm_green.controller.single_instance import ControllerRunning, lock_path, sole_controller

pytestmark = pytest.mark.timeout(60)


@contextmanager
def holder(state_db: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``state_db``'s lock until it is killed (SIGKILL: nothing of its own
    runs at its end, as when the OOM killer takes a controller)."""
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from slurm_green.controller.single_instance import sole_controller
        with sole_controller(Path({str(state_db)!r})):
            print("held", flush=True)
            time.sleep(120)
    """)
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_second_controller_is_refused_naming_the_holder(tmp_path: Path) -> None:
    state_db = tmp_path / "state.db"
    with holder(state_db) as other:
        with pytest.raises(ControllerRunning) as refused:
            with sole_controller(state_db):
                pytest.fail("the block ran beside another controller")
        message = str(refused.value)
        assert f"pid {other.pid} on " in message and str(lock_path(state_db)) in message
        assert "systemctl stop slurm-green" in message and "slurm-green plan" in message
        # The refused process left the holder's record as it was.
        assert lock_path(state_db).read_text().startswith(f"pid {other.pid} ")


def test_a_killed_controller_leaves_no_stale_lock(tmp_path: Path) -> None:
    state_db = tmp_path / "state.db"
    with holder(state_db) as other:
        other.send_signal(signal.SIGKILL)
        other.wait()
    with sole_controller(state_db):  # the record of the dead holder is still there; the lock is not
        assert lock_path(state_db).read_text() == f"pid {os.getpid()} on {os.uname().nodename}\n"


def test_one_controller_after_another_in_one_process(tmp_path: Path) -> None:
    state_db = tmp_path / "deep" / "folder" / "state.db"  # created, as the store creates it
    with sole_controller(state_db):
        pass
    with sole_controller(state_db):
        pass
    assert lock_path(state_db) == tmp_path / "deep" / "folder" / "state.lock"


def test_the_lock_is_taken_per_state_database(tmp_path: Path) -> None:
    with holder(tmp_path / "a.db"), sole_controller(tmp_path / "b.db"):
        pass


def test_a_symlink_or_a_fifo_in_the_locks_place_is_refused_at_once(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("precious\n")
    lock_path(tmp_path / "linked.db").symlink_to(target)
    with pytest.raises(OSError):
        with sole_controller(tmp_path / "linked.db"):
            pytest.fail("locked through a symlink")
    assert target.read_text() == "precious\n"
    os.mkfifo(lock_path(tmp_path / "piped.db"))
    with pytest.raises(OSError, match="not a regular file"):
        with sole_controller(tmp_path / "piped.db"):
            pytest.fail("locked on a FIFO")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create another user's file")
def test_a_lock_file_of_another_user_still_locks() -> None:
    """Root's lock, left by an ``--allow-root`` run, must not stop the service user's controller,
    nor let two of them run: flock needs no write access."""
    folder = Path(tempfile.mkdtemp())  # pytest's tmp_path is root's alone; nobody must reach this one
    folder.chmod(0o755)
    state_db = folder / "state.db"
    lock_path(state_db).write_text("pid 1 on elsewhere\n")
    lock_path(state_db).chmod(0o644)
    code = textwrap.dedent(f"""
        import os, sys, time
        from pathlib import Path
        from slurm_green.controller.single_instance import sole_controller
        os.setgid(65534); os.setuid(65534)
        with sole_controller(Path({str(state_db)!r})):
            print("held", flush=True)
            time.sleep(120)
    """)
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line == "held\n", process.stderr.read() if process.stderr else line
        with pytest.raises(ControllerRunning):
            with sole_controller(state_db):
                pytest.fail("two controllers")
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(folder)
