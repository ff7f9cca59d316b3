"""Only a regular file is opened; anything else is an OSError before a byte is read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_green.carbon.regular_file import open_regular


def test_a_regular_file_is_read_as_bytes(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"a,b\n\xff")
    with open_regular(path) as handle:
        assert handle.read() == b"a,b\n\xff"


@pytest.mark.timeout(20)
def test_a_fifo_a_directory_or_a_device_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # with no writer, a plain open() would block here for ever
    for path in (fifo, tmp_path, Path("/dev/zero")):
        with pytest.raises(OSError, match="not a regular file"):
            open_regular(path)


def test_a_missing_file_is_the_usual_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "nope")
