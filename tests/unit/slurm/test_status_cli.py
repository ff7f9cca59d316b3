"""`slurm-green status` on captured Slurm output (the runner is the only stand-in)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from slurm_captured import FIXTURES, fixture_versions, load_json, nodes_file
from test_cli_backend import ScriptedRunner, reads

from slurm_green.cli import main
from slurm_green.cli import status as status_module
from slurm_green.slurm.cli_backend import CliBackend
from slurm_green.slurm.runner import DockerExecRunner


@pytest.fixture
def captured(monkeypatch, request):
    version = request.param
    folder = FIXTURES / version
    runner = ScriptedRunner(reads((folder / "squeue.json").read_text(), nodes_file(version).read_text()))
    chosen: list = []

    def make_backend(given=None):
        chosen.append(given)
        return CliBackend(runner)

    monkeypatch.setattr(status_module, "make_backend", make_backend)
    return version, chosen


@pytest.mark.parametrize("captured", fixture_versions(), indirect=True)
def test_json_output(captured):
    version, _ = captured
    result = CliRunner().invoke(main, ["status", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["slurm_version"].startswith(version)
    raw_nodes = json.loads(nodes_file(version).read_text())["nodes"]
    assert [node["name"] for node in document["nodes"]] == [node["name"] for node in raw_nodes]
    for node in document["nodes"]:
        assert {"name", "state", "gpus_total", "gpus_allocated"} <= node.keys() and node["gpus_total"] == 4
    raw_ids = {job["job_id"] for job in load_json(version, "squeue.json")["jobs"]}
    assert {job["id"] for job in document["jobs"]} == raw_ids
    for job in document["jobs"]:
        assert {"id", "state", "gpus_per_node", "nodes"} <= job.keys()


@pytest.mark.parametrize("captured", fixture_versions(), indirect=True)
def test_table_output_and_docker_option(captured):
    _, chosen = captured
    result = CliRunner().invoke(main, ["status", "--via-docker", "slurmgreen-2411-controller", "--user", "sgreen"])
    assert result.exit_code == 0, result.output
    assert "node1" in result.output and "pending" in result.output
    assert chosen == [DockerExecRunner("slurmgreen-2411-controller", user="sgreen")]


def test_unreachable_slurm_is_a_clean_error(monkeypatch):
    runner = ScriptedRunner(lambda argv: (1, "", "squeue: error: Unable to contact slurm controller (connect failure)"))
    monkeypatch.setattr(status_module, "make_backend", lambda given=None: CliBackend(runner))
    result = CliRunner().invoke(main, ["status"])
    assert result.exit_code == 1
    assert "cannot read Slurm (unreachable)" in result.output
