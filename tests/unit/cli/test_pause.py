"""``slurm-green pause`` / ``resume`` as an admin runs them: the switch file, the immediate
release (one tick that records nothing), and the one-line errors. The cluster is the
in-memory backend of test_run_once, put in by wrapping ``assemble`` as that test does."""

from __future__ import annotations

import json
import os

from cli_setup import write_config
from click.testing import CliRunner
from test_run_once import RefusingBackend, deferred

from slurm_green.cli import main
from slurm_green.controller import assemble as assemble_module


def with_cluster(monkeypatch, backend):
    real = assemble_module.assemble

    def assemble(config, **kwargs):  # type: ignore[no-untyped-def]
        parts = real(config, **kwargs)
        parts.controller.backend = backend
        return parts

    monkeypatch.setattr(assemble_module, "assemble", assemble)


def test_pause_releases_now_records_nothing_and_resume_undoes_it(monkeypatch, tmp_path):
    backend = RefusingBackend([deferred(1), deferred(2)], refuse=[])
    with_cluster(monkeypatch, backend)
    config = str(write_config(tmp_path))
    result = CliRunner().invoke(main, ["pause", "--reason", "grid emergency", "--config", config])
    assert result.exit_code == 0, result.output
    assert "2 managed pending job(s) released now" in result.output
    switch = tmp_path / "state.paused"
    assert json.loads(switch.read_text())["reason"] == "grid emergency"
    assert not (tmp_path / "state.db").exists()  # the release tick recorded nothing
    again = CliRunner().invoke(main, ["resume", "--config", config])
    assert again.exit_code == 0 and "resumed (paused by" in again.output and "grid emergency" in again.output
    assert not switch.exists()
    assert "not paused" in CliRunner().invoke(main, ["resume", "--config", config]).output


def test_pause_whose_release_slurm_refuses_exits_3_and_stays_paused(monkeypatch, tmp_path):
    with_cluster(monkeypatch, RefusingBackend([deferred(1)], refuse=[1]))
    result = CliRunner().invoke(main, ["pause", "--config", str(write_config(tmp_path))])
    assert result.exit_code == 3
    assert "Error: paused, but 1 of 1 actions failed (permission_denied x1)" in result.output
    assert (tmp_path / "state.paused").exists()


def test_pause_without_a_state_folder_names_it(tmp_path):
    config = write_config(tmp_path)
    config.write_text(config.read_text().replace(f"{tmp_path}/state.db", f"{tmp_path}/missing/state.db"))
    result = CliRunner().invoke(main, ["pause", "--config", str(config)])
    assert result.exit_code == 1 and f"Error: {tmp_path}/missing does not exist" in result.output
    assert os.listdir(tmp_path) == ["config.toml"]


def test_a_dry_run_pause_says_it_changed_nothing(monkeypatch, tmp_path):
    backend = RefusingBackend([deferred(1)], refuse=[1])  # would fail, were anything sent
    with_cluster(monkeypatch, backend)
    config = write_config(tmp_path, extra="")
    config.write_text(config.read_text().replace("[controller]\n", "[controller]\ndry_run = true\n"))
    result = CliRunner().invoke(main, ["pause", "--config", str(config)])
    assert result.exit_code == 0 and "(dry_run: nothing changed in Slurm)" in result.output, result.output
