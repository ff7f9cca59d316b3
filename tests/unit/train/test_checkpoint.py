"""A checkpoint is replaced whole or not at all."""

from __future__ import annotations

from typing import BinaryIO

import pytest

from slurm_green.train.checkpoint import atomic_write


def test_the_file_is_replaced_whole_and_no_temporary_file_is_left(tmp_path) -> None:
    path = tmp_path / "ckpt" / "green.pt"
    path.parent.mkdir()
    atomic_write(path, lambda h: h.write(b"old"))
    atomic_write(path, lambda h: h.write(b"new"))
    assert path.read_bytes() == b"new" and [p.name for p in path.parent.iterdir()] == ["green.pt"]


def test_a_write_that_fails_half_way_keeps_the_last_checkpoint(tmp_path) -> None:
    path = tmp_path / "green.pt"
    atomic_write(path, lambda h: h.write(b"good"))

    def killed(handle: BinaryIO) -> None:
        handle.write(b"half")
        raise KeyboardInterrupt  # what a signal's exception would do mid-write

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, killed)
    assert path.read_bytes() == b"good" and [p.name for p in tmp_path.iterdir()] == ["green.pt"]
