"""The Epilog's energy record as root writes it into the controller's directory."""

from __future__ import annotations

import os
import tempfile

from slurm_green.core import telemetry
from slurm_green.core.telemetry import NodeEnergy


def test_write_makes_the_record_readable_through_the_file_never_by_its_name(tmp_path, monkeypatch) -> None:
    """The directory's owner (the service user) swaps the temporary name for a link to a file
    of root's right after mkstemp: root must not make that file readable to all."""
    secret = tmp_path / "munge.key"
    secret.write_text("secret")
    secret.chmod(0o400)
    spool = tmp_path / "telemetry"
    spool.mkdir()
    mkstemp = tempfile.mkstemp

    def raced(*args, **kwargs):
        fd, name = mkstemp(*args, **kwargs)
        os.unlink(name)
        os.symlink(secret, name)
        return fd, name

    monkeypatch.setattr(telemetry.tempfile, "mkstemp", raced)
    telemetry.write(spool, NodeEnergy(42, "node1", 1, 10.0, 5.0))
    assert secret.stat().st_mode & 0o777 == 0o400


def test_write_leaves_a_whole_record_the_controller_can_read(tmp_path) -> None:
    record = NodeEnergy(42, "node1", 2, 10.0, 5.0, started_at=1_700_000_000.0)
    path = telemetry.write(tmp_path, record)
    assert path.name == "42.node1.1700000000.energy.json"
    assert path.stat().st_mode & 0o777 == 0o644
    assert telemetry.read(path) == record
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
