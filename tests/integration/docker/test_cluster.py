"""Tests of the Docker test cluster itself (docker/cluster), on every Slurm version."""
from __future__ import annotations

import re
import subprocess
import time

import pytest

from cluster import CLUSTER_SCRIPT, NODES, Cluster

pytestmark = [pytest.mark.integration, pytest.mark.contract]


def _wait_state(c: Cluster, job: int, states: set[str], timeout: float = 60) -> str:
    return c.wait_for(lambda: (s := c.job_state(job)) in states and s, timeout,
                      message=f"job {job} in {states}")


def _job_output(c: Cluster, job: int, path: str) -> str:
    """Read a file written by a finished job on the node that ran it."""
    node = c.exec("controller", "sacct", "-n", "-X", "-P", "-j", str(job), "-o", "NodeList").stdout.strip()
    assert node in NODES, f"job {job} ran on {node!r}"
    return c.exec(node, "cat", path).stdout


def test_every_node_idle_with_four_gpus_and_sixteen_shards(cluster: Cluster):
    out = cluster.exec("controller", "sinfo", "-h", "-N", "-o", "%N|%t|%G").stdout
    rows = {n: (s, g) for n, s, g in (line.split("|") for line in out.split())}
    assert sorted(rows) == list(NODES)
    for node, (state, gres) in rows.items():
        assert state == "idle", (node, state)
        assert f"gpu:{'h100' if node in ('node1', 'node2') else 'a40'}:4" in gres, (node, gres)
        assert re.search(r"shard(:[\w]+)?:16\b", gres), (node, gres)
    conf = cluster.exec("controller", "scontrol", "show", "node", "node1").stdout
    assert "gres/gpu=4" in conf and "gres/shard=16" in conf


def test_gpu_job_sees_two_gpu_indices(cluster: Cluster):
    job = cluster.sbatch("alice", ["--gres=gpu:2", "-t", "5"],
                         'echo "GPUS=$SLURM_JOB_GPUS" > /tmp/gpu-$SLURM_JOB_ID.txt\n'
                         'echo "CUDA=$CUDA_VISIBLE_DEVICES" >> /tmp/gpu-$SLURM_JOB_ID.txt\n')
    assert _wait_state(cluster, job, {"COMPLETED", "FAILED", "CANCELLED"}) == "COMPLETED"
    out = _job_output(cluster, job, f"/tmp/gpu-{job}.txt")
    gpus = re.search(r"GPUS=(\S*)", out).group(1)
    assert re.fullmatch(r"\d,\d", gpus), out
    assert len(set(gpus.split(","))) == 2


def test_shard_job_runs(cluster: Cluster):
    job = cluster.sbatch("bob", ["--gres=shard:4", "-t", "5"], "sleep 1\n")
    assert _wait_state(cluster, job, {"COMPLETED", "FAILED", "CANCELLED"}) == "COMPLETED"


def test_job_starts_within_a_few_seconds(cluster: Cluster):
    t0 = time.monotonic()
    job = cluster.sbatch("alice", ["--gres=gpu:1", "-t", "5"], "sleep 30\n")
    _wait_state(cluster, job, {"RUNNING"}, timeout=30)
    latency = time.monotonic() - t0
    print(f"submit-to-RUNNING latency: {latency:.1f} s")
    assert latency < 10


def test_sacct_answers_with_user_and_account(cluster: Cluster):
    job = cluster.sbatch("alice", ["-t", "5", "--comment", "acct-check"], "true\n")
    _wait_state(cluster, job, {"COMPLETED", "FAILED"})
    row = cluster.wait_for(
        lambda: cluster.exec("controller", "sacct", "-n", "-X", "-P", "-j", str(job),
                             "-o", "JobID,User,Account,State").stdout.strip(),
        timeout=30, message="sacct row")
    assert row.split("|") == [str(job), "alice", "research", "COMPLETED"]


def test_users_accounts_and_operator(cluster: Cluster):
    out = cluster.exec("controller", "sacctmgr", "-n", "-P", "show", "user",
                       "format=user,defaultaccount,adminlevel").stdout
    users = {u: (a, lvl) for u, a, lvl in (line.split("|") for line in out.split())}
    assert users["alice"] == ("research", "None")
    assert users["bob"] == ("research", "None")
    assert users["sgreen"] == ("ops", "Operator")
    for node in ("node1", "controller"):
        ids = cluster.exec(node, "id", "-u", "alice").stdout.strip()
        assert ids == "2001"


def test_operator_may_hold_other_users_jobs_but_users_may_not(cluster: Cluster):
    job = cluster.sbatch("alice", ["--begin=now+1hour", "-t", "5"], "true\n")
    refused = cluster.exec("controller", "scontrol", "hold", str(job), user="bob", check=False)
    assert refused.returncode != 0
    cluster.exec("controller", "scontrol", "hold", str(job), user="sgreen")
    reason = cluster.exec("controller", "squeue", "-h", "-j", str(job), "-o", "%r").stdout.strip()
    assert reason.startswith("JobHeld")


def test_decision_key_modes(cluster: Cluster):
    st = cluster.exec("node1", "stat", "-c", "%a %U", "/etc/slurm-green/decision.key").stdout.split()
    assert st == ["400", "root"]
    assert cluster.exec("controller", "cat", "/etc/slurm-green/decision.key", user="sgreen").stdout.strip()
    assert cluster.exec("controller", "cat", "/etc/slurm-green/decision.key", user="alice",
                        check=False).returncode != 0


def test_repo_mounted_and_python_available(cluster: Cluster):
    for node in ("node1", "controller"):
        cluster.exec(node, "test", "-f", "/opt/slurm-green/pyproject.toml")
    # Compute nodes: python3 (stdlib) with the repo on PYTHONPATH, as the Prolog uses it.
    out = cluster.exec("node2", "python3", "-c", "import slurm_green, sys; print(sys.version_info >= (3, 11))",
                       env={"PYTHONPATH": "/opt/slurm-green"}).stdout.strip()
    assert out == "True"
    # Controller: slurm_green importable from the venv, as the service user.
    cluster.exec("controller", "python", "-c", "import slurm_green", user="sgreen")


def test_gpu_device_nodes(cluster: Cluster):
    out = cluster.exec("node3", "stat", "-c", "%F %t:%T", "/dev/nvidia0", "/dev/nvidia3").stdout
    assert out.split("\n")[:2] == ["character special file c3:0", "character special file c3:3"]


def test_stopped_node_goes_down_and_comes_back(cluster: Cluster):
    cluster.stop_node("node4")
    t0 = time.monotonic()
    state = cluster.wait_for(
        lambda: (s := cluster.node_states().get("node4", "")) and
        (s.endswith("*") or s.startswith("down")) and s, timeout=90,
        message="node4 not responding")
    print(f"node4 seen as {state} {time.monotonic() - t0:.0f} s after docker stop")
    cluster.start_node("node4")
    t1 = time.monotonic()
    cluster.wait_for(lambda: cluster.node_states().get("node4") == "idle", timeout=90,
                     message="node4 idle again")
    print(f"node4 idle {time.monotonic() - t1:.0f} s after docker start")


def test_up_twice_is_idempotent(cluster: Cluster):
    def containers():
        ids = {}
        for svc in ("slurmctld", *NODES, "controller"):
            p = subprocess.run(["docker", "inspect", "-f", "{{.Id}} {{.State.StartedAt}}",
                                cluster.container(svc)], capture_output=True, text=True, check=True)
            ids[svc] = p.stdout.strip()
        return ids

    def up():
        t0 = time.monotonic()
        p = subprocess.run([str(CLUSTER_SCRIPT), "up", "--slurm", cluster.version],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return time.monotonic() - t0

    # The first `up` applies any change made to the repository since the session
    # started (e.g. a new hook wrapper or job_submit.lua recreates the containers).
    up()
    cluster.wait_all_idle()
    before = containers()
    elapsed = up()
    assert containers() == before
    assert elapsed < 20, f"second `up` took {elapsed:.1f} s"
    status = subprocess.run([str(CLUSTER_SCRIPT), "status", "--slurm", cluster.version], capture_output=True,
                            text=True)
    assert status.returncode == 0, status.stdout + status.stderr
    assert cluster.version in status.stdout
