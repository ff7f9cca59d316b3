"""Enactment on the Docker cluster: job_submit.lua, the Prolog's caps, the Epilog's restore.

Needs a cluster brought up (`docker/cluster up`) with the Prolog/Epilog wrappers
and slurm_green/job_submit/job_submit.lua installed; the nodes are switched to emulated GPUs here by
writing /etc/slurm-green/gpu.conf (removed again at the end).
"""

from __future__ import annotations

import json
import secrets

import pytest
from cluster import CLUSTER_SCRIPT, NODES, Cluster

from slurm_green.core import decision_token

pytestmark = [pytest.mark.integration, pytest.mark.contract]

STATE = "/var/lib/slurm-green"
LOG = "/var/log/slurm-green/hooks.log"
GPU_CONF = f"SLURM_GREEN_GPU_EMULATED_STATE={STATE}/gpus.json\n"
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}


@pytest.fixture(scope="module")
def site(cluster: Cluster):
    """Emulated GPUs on every node, fresh state; yields the site's decision key."""
    hooks = (CLUSTER_SCRIPT.parent / ".build" / cluster.compose_project / "hooks").read_text().split()
    missing = {"Prolog", "Epilog", "job_submit.lua"} - set(hooks)
    if missing:
        pytest.fail(f"cluster was brought up without {sorted(missing)}: run docker/cluster down && up")
    for node in NODES:
        cluster.sh(node, f"printf '%s' '{GPU_CONF}' > /etc/slurm-green/gpu.conf && rm -rf {STATE} && : > {LOG}")
    yield decision_token.load_key(CLUSTER_SCRIPT.parent / ".build" / "decision.key")
    for node in NODES:
        cluster.sh(node, f"rm -f /etc/slurm-green/gpu.conf; rm -rf {STATE}", check=False)


def gpu_limits(c: Cluster, node: str) -> dict[int, float]:
    text = c.exec(node, "cat", f"{STATE}/gpus.json", check=False).stdout
    devices = json.loads(text)["devices"] if text else {}
    return {int(minor): d["current_w"] for minor, d in devices.items()}


def state_of(c: Cluster, job: int, states: set[str], timeout: float = 60) -> str:
    return c.wait_for(lambda: (s := c.job_state(job)) in states and s, timeout, message=f"job {job} in {states}")


def submit_with_decision(c: Cluster, key: bytes, node: str, payload: dict, gpus: int = 2) -> int:
    """alice submits held; the controller (sgreen) writes its signed decision and releases."""
    job = c.sbatch("alice", ["--hold", "-w", node, f"--gres=gpu:{gpus}", "-t", "5", "--comment", "green:cap=yes"],
                   'echo "$SLURM_JOB_GPUS" > /tmp/sg-gpus-$SLURM_JOB_ID; sleep 300\n')
    token = decision_token.sign(key, job, payload)
    c.exec("controller", "scontrol", "update", f"jobid={job}", f"Comment=green:cap=yes {token}", user="sgreen")
    c.exec("controller", "scontrol", "release", str(job), user="sgreen")
    return job


def job_gpus(c: Cluster, node: str, job: int) -> list[int]:
    text = c.wait_for(lambda: c.exec(node, "cat", f"/tmp/sg-gpus-{job}", check=False).stdout.strip(), 30)
    return sorted(int(x) for x in text.split(","))


def test_valid_decision_caps_exactly_the_jobs_gpus_then_restores(cluster: Cluster, site: bytes) -> None:
    # an admin's earlier limit, not the board default, so that a reset to default would fail
    cluster.exec("node1", "python3", "-c", (
        "from slurm_green.gpu.emulated import EmulatedBackend\n"
        f"b = EmulatedBackend('{STATE}/gpus.json')\n"
        "for m in range(4): b.set_limit(m, 350)\n"), env={"PYTHONPATH": "/opt/slurm-green"})
    try:
        job = submit_with_decision(cluster, site, "node1", {"cap": 0.6})
        state_of(cluster, job, {"RUNNING"})
        mine = job_gpus(cluster, "node1", job)
        limits = gpu_limits(cluster, "node1")
        assert {m: limits[m] for m in mine} == {m: 240 for m in mine}
        assert all(limits[m] == 350 for m in range(4) if m not in mine)
        cluster.exec("controller", "scancel", str(job))
        cluster.wait_for(lambda: all(gpu_limits(cluster, "node1")[m] == 350 for m in mine), 60,
                         message="earlier limits restored by the Epilog")
        log = cluster.exec("node1", "cat", LOG).stdout
        assert f"prolog job={job}: gpu {mine[0]}: 350 W -> 240 W" in log
    finally:
        cluster.exec("node1", "rm", "-f", f"{STATE}/gpus.json")


def test_prolog_meeting_a_gpu_error_keeps_the_node_up(cluster: Cluster, site: bytes) -> None:
    cluster.exec("node2", "python3", "-c", (
        "import json, sys; sys.path.insert(0, '/opt/slurm-green')\n"
        "from slurm_green.gpu.emulated import EmulatedBackend\n"
        f"p = '{STATE}/gpus.json'; [EmulatedBackend(p).limits(m) for m in range(4)]\n"
        "s = json.load(open(p)); [d.update(fail=True) for d in s['devices'].values()]\n"
        "json.dump(s, open(p, 'w'))\n"))
    try:
        job = submit_with_decision(cluster, site, "node2", {"cap": 0.5})
        state_of(cluster, job, {"RUNNING"})
        cluster.exec("controller", "scancel", str(job))
        state_of(cluster, job, DONE)
        assert "emulated failure" in cluster.exec("node2", "cat", LOG).stdout
        cluster.wait_for(lambda: cluster.node_states().get("node2") == "idle", 60, message="node2 idle, not drained")
    finally:
        cluster.exec("node2", "rm", "-f", f"{STATE}/gpus.json")


def test_malformed_option_gets_a_clear_message_at_submit(cluster: Cluster) -> None:
    p = cluster.exec("controller", "sbatch", "--output=/dev/null", "--chdir=/tmp", "--comment", "green:flex=-3h",
                     user="alice", input="#!/bin/bash\nsleep 1\n", check=False)
    assert p.returncode != 0
    assert "slurm-green" in p.stderr and "flex='-3h'" in p.stderr and "green:off" in p.stderr


def test_alice_cannot_move_or_redecide_a_managed_job(cluster: Cluster, site: bytes) -> None:
    job = cluster.sbatch("alice", ["--gres=gpu:1", "-t", "5", "--comment", "green:flex=2h"], "sleep 1\n")
    assert cluster.exec("controller", "squeue", "-h", "-j", str(job), "-o", "%r").stdout.strip() == "BeginTime"
    token = decision_token.sign(secrets.token_bytes(32), job, {"cap": 1.0})
    for change in ("StartTime=now", f"Comment={token}", "TresPerNode=gres/gpu:4"):
        p = cluster.exec("controller", "scontrol", "update", f"jobid={job}", change, user="alice", check=False)
        assert p.returncode != 0, change
        # Slurm 22.05 does not pass slurm.log_user text of job_modify to scontrol
        # ("Unspecified error"); the refusal is the same
        assert "slurm-green" in p.stderr or cluster.version_tuple < (23, 2), p.stderr
    assert cluster.exec("controller", "squeue", "-h", "-j", str(job), "-o", "%r|%k").stdout.strip() == \
        "BeginTime|green:flex=2h"
    # the controller may
    cluster.exec("controller", "scontrol", "update", f"jobid={job}", "StartTime=now", user="sgreen")
    state_of(cluster, job, {"RUNNING", *DONE})


def test_a_token_alice_writes_is_stripped_or_ignored(cluster: Cluster, site: bytes) -> None:
    forged = decision_token.sign(secrets.token_bytes(32), 1, {"cap": 0.25})
    job = cluster.sbatch("alice", ["--hold", "-w", "node3", "--gres=gpu:1", "-t", "5",
                                   "--comment", f"green:cap=yes {forged}"], "sleep 300\n")
    assert "sg1." not in cluster.exec("controller", "squeue", "-h", "-j", str(job), "-o", "%k").stdout
    # Even a token that gets into the comment (here: root writes one not signed for this job)
    # is ignored by the Prolog: no cap.
    wrong_job = decision_token.sign(site, job + 1000, {"cap": 0.25})
    cluster.exec("controller", "scontrol", "update", f"jobid={job}", f"Comment={wrong_job}")
    cluster.exec("controller", "scontrol", "release", str(job))
    state_of(cluster, job, {"RUNNING"})
    # 26.05 may report RUNNING while the Prolog is still at work: wait for its log line
    cluster.wait_for(lambda: f"prolog job={job}: decision token ignored" in cluster.exec("node3", "cat", LOG).stdout,
                     30, message="the Prolog logged the ignored token")
    assert all(w == 400 for w in gpu_limits(cluster, "node3").values())


def test_alice_writing_a_token_into_an_unmanaged_job_is_stripped(cluster: Cluster, site: bytes) -> None:
    job = cluster.sbatch("alice", ["--hold", "--gres=gpu:1", "-t", "5", "--comment", "green:off"], "sleep 1\n")
    token = decision_token.sign(secrets.token_bytes(32), job, {"cap": 0.25})
    cluster.exec("controller", "scontrol", "update", f"jobid={job}", f"Comment=mine {token}", user="alice")
    assert cluster.exec("controller", "squeue", "-h", "-j", str(job), "-o", "%k").stdout.strip() == "mine"
