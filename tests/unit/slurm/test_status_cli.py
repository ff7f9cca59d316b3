"""`slurm-green status` on captured Slurm output (the runner is the only stand-in)."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner
from slurm_captured import FIXTURES, fixture_versions, load_json, nodes_file
from test_cli_backend import ScriptedRunner, reads

from slurm_green.cli import main
from slurm_green.cli import status as status_module
from slurm_green.core.cluster import ClusterSnapshot, Node, NodeState
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


class _Snapshot:
    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self._snapshot = snapshot

    def snapshot(self) -> ClusterSnapshot:
        return self._snapshot


@pytest.mark.parametrize("reason, shown", [
    ("XID 79 on [/dev/nvidia2], RMA", "XID 79 on [/dev/nvidia2], RMA"),  # was rich's MarkupError: exit 70
    ("[jdoe] bios update", "[jdoe] bios update"),  # was a markup tag: "[jdoe]" vanished
    ("nhc\nnode9  idle  0/4\x1b[2J", "nhc\\nnode9  idle  0/4\\x1b[2J"),  # forged row, terminal escape
])
def test_a_node_reason_is_shown_as_written_and_inert(monkeypatch, reason, shown):
    snapshot = ClusterSnapshot(taken_at=time.time(), slurm_version="24.11.0", nodes=(
        Node("node1", NodeState.IDLE, frozenset({"DRAIN"}), reason=reason, gpus_total=4),))
    monkeypatch.setattr(status_module, "make_backend", lambda given=None: _Snapshot(snapshot))
    result = CliRunner().invoke(main, ["status"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert shown in result.output and "\x1b" not in result.output, result.output
