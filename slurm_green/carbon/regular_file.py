"""Open a file that an admin names in the configuration or the environment, only if it is a regular file.

A carbon CSV and a ``*_FILE`` credential are read by a long-running controller. A FIFO named
there would block the read (and the tick) until some writer came, and a device such as
``/dev/zero`` would be read for ever, into memory. The file is opened without blocking and
checked before a byte is read, so either is an error at once and the controller moves on.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO


def open_regular(path: str | Path) -> BinaryIO:
    """``path`` opened for binary reading, or :class:`OSError` ("not a regular file") if it is not one."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
