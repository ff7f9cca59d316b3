"""``run`` as root refuses where root would take the state files from the service user (issue 15):
one line naming the file and ``sudo -u sgreen``, nothing created; ``--allow-root`` overrides."""

from __future__ import annotations

import os

import pytest
from cli_setup import no_slurm, write_config
from click.testing import CliRunner

from slurm_green.cli import main
from slurm_green.cli.controller import root_would_own
from slurm_green.controller.config import load_config

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="checks what root may do; run as root")


@needs_root
@pytest.mark.parametrize("once", [["--once"], []])
def test_root_is_refused_where_the_state_is_not_roots(tmp_path, once):
    state = tmp_path / "lib"
    state.mkdir()
    os.chown(state, 1000, 1000)  # the service user's folder, as install makes it
    config = write_config(tmp_path, extra="")
    config.write_text(config.read_text().replace(f'{tmp_path}/state.db', f'{state}/state.db'))
    result = CliRunner().invoke(main, ["run", *once, "--config", str(config)], env=no_slurm(tmp_path))
    assert result.exit_code == 1
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert f"running as root would leave {state}/state.db owned by root" in line and "sudo -u sgreen" in line
    assert os.listdir(state) == [] and not (tmp_path / "cache").exists()  # nothing created


@needs_root
def test_allow_root_goes_on_to_the_tick(tmp_path):
    result = CliRunner().invoke(main, ["run", "--once", "--allow-root", "--config", str(write_config(tmp_path))],
                                env=no_slurm(tmp_path))
    assert result.exit_code == 1 and "cannot read Slurm" in result.output


@needs_root
def test_root_may_run_where_root_owns_every_state_path(tmp_path):
    config = load_config(write_config(tmp_path))
    assert root_would_own(config) == tmp_path / "state.db"  # not there yet: root would create it
    (tmp_path / "state.db").touch()
    (tmp_path / "cache").mkdir()
    assert root_would_own(config) is None


def test_no_other_user_is_ever_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert root_would_own(load_config(write_config(tmp_path))) is None
