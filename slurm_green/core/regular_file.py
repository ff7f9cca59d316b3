"""Open a file only if it is a regular file: what the controller reads from a path it is given.

A carbon CSV and a ``*_FILE`` credential (named by the admin) and a job's progress report
(written by its user) are read by a long-running controller. A FIFO there would block the
read (and the tick) until some writer came, and a device such as ``/dev/zero`` would be read
for ever, into memory. The file is opened without blocking and checked before a byte is
read, so either is an error at once and the controller moves on.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO


def open_regular(path: str | Path, *, follow_links: bool = True) -> BinaryIO:
    """``path`` opened for binary reading, or :class:`OSError` ("not a regular file") if it is not
    one; with ``follow_links=False`` a symbolic link is refused too (``O_NOFOLLOW``: ELOOP), for a
    file in a directory users write to."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
