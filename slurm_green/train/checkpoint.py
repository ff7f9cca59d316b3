"""Write a file whole or not at all: checkpoints and progress reports (no PyTorch here: the
serializer is passed in).

Why: Slurm's warning signal comes a fixed time before the job is killed, and a node can
fail at any moment; a checkpoint cut off half-way must never replace the last good one.
So the bytes go to a temporary file in the same directory (same filesystem, so the
rename is atomic), are flushed to the disk (``fsync``), and only then renamed over the
checkpoint; the directory is synced too, so the rename itself survives a crash.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: Path, write: Callable[[BinaryIO], None], mode: int | None = None) -> Path:
    """Call ``write`` on a temporary file beside ``path``, then rename it over ``path``;
    ``mode``: the file's permissions (``mkstemp`` makes it 0600). The directory must exist:
    creating one is the caller's call (a progress report must not make its site's directory)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return path
