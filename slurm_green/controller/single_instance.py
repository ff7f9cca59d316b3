"""One controller per state database: a second ``run`` beside a running one is refused.

Two controllers on one store would both decide and enact every tick, each from its own
snapshot: the same updates sent twice and recorded twice in the audit trail, and with
``[elastic]`` a running job could be told to checkpoint and requeue by both. It happens
without anyone meaning it: the install steps check a site with ``run --once``, and an
admin repeats that check later while the service runs.

So ``run`` (for its whole life) and ``run --once`` (for its tick) hold an exclusive
``flock`` on ``<state_db>.lock``. The kernel drops the lock when the process ends, however
it ends (SIGKILL, the OOM killer), so there is no stale lock to clean up, which a pid file
alone would leave. The holder's pid and host are written into the file only so that the
refusal can say who holds it. A lock guards one host's processes (and those of hosts
sharing the state folder over a file system with working ``flock``, such as NFSv4); two
controllers with two state databases are not seen, which docs/operations.md says.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: What the holder writes about itself; more than this is not a holder's record.
_RECORD_LIMIT = 256


class ControllerRunning(RuntimeError):
    """Another controller holds this state database's lock."""


def lock_path(state_db: Path) -> Path:
    """The lock of the controller whose store is ``state_db`` (beside it, as the pause switch is)."""
    return Path(state_db).with_suffix(".lock")


@contextmanager
def sole_controller(state_db: Path) -> Iterator[None]:
    """Hold ``state_db``'s controller lock while the block runs; :class:`ControllerRunning` at
    once (no waiting) if another process holds it. The folder is created as the store creates
    it; a symlink in the lock's place is refused (``O_NOFOLLOW``), so a controller run as root
    cannot be made to write through one, and so is anything but a regular file (a FIFO would
    block the start): an ``OSError`` either way."""
    path = lock_path(state_db)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd, writable = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o644), True
    except PermissionError:
        # A lock another user created (root's, from an --allow-root run): flock needs no write
        # access, so it still locks; only the holder's record is not written.
        fd, writable = os.open(path, os.O_RDONLY | flags), False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ControllerRunning(
                f"another slurm-green controller is running on this state database: {path} is held "
                f"({_holder(fd)}); stop it first (systemctl stop slurm-green), or use `slurm-green plan` to see "
                "what a tick would do without enacting it") from None
        if writable:  # only the holder writes, after taking the lock: a refused process changes nothing
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def _holder(fd: int) -> str:
    """Who holds the lock, as its record says (best effort: the record is only for the message)."""
    try:
        record = os.pread(fd, _RECORD_LIMIT, 0).decode("ascii", "replace").strip()
    except OSError:
        record = ""
    return f"by {record}" if record.startswith("pid ") and record.isprintable() else "holder not recorded"
