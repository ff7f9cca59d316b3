"""Only a regular file is opened; anything else is an OSError before a byte is read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_green.core.regular_file import open_regular


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


def test_a_link_is_refused_where_links_are_not_followed(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"x")
    link = tmp_path / "link"
    link.symlink_to(target)
    with open_regular(link) as handle:
        assert handle.read() == b"x"
    with pytest.raises(OSError):  # ELOOP
        open_regular(link, follow_links=False)
