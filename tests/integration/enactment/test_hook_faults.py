"""The Prolog/Epilog on the Docker cluster when things around them fail, and for job arrays.

The nodes' entrypoint installs the wrappers at /usr/local/libexec/slurm-green as an admin
would (python3 -m slurm_green.gpu.wrappers); slurm.conf names them there. Here: the
repository copy moved away on a node must not drain it, and every task of an array is
capped by the decision the controller signed for the array (slurmd gives the Prolog no
SLURM_ARRAY_JOB_ID, so the Prolog asks slurmctld which array a task belongs to).
"""

from __future__ import annotations

import json

import pytest
from cluster import CLUSTER_SCRIPT, NODES, Cluster

from slurm_green.core import decision_token
from slurm_green.gpu.wrappers import HOOKS_DIR

pytestmark = [pytest.mark.integration]

STATE = "/var/lib/slurm-green"
LOG = "/var/log/slurm-green/hooks.log"
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}


@pytest.fixture(scope="module")
def site(cluster: Cluster):
    """Emulated GPUs on every node, fresh state and log; yields the site's decision key."""
    for node in NODES:
        cluster.sh(node, f"printf 'SLURM_GREEN_GPU_EMULATED_STATE={STATE}/gpus.json\\n' > /etc/slurm-green/gpu.conf"
                         f" && rm -rf {STATE} && : > {LOG}")
    yield decision_token.load_key(CLUSTER_SCRIPT.parent / ".build" / "decision.key")
    for node in NODES:
        cluster.sh(node, f"rm -f /etc/slurm-green/gpu.conf; rm -rf {STATE}", check=False)


def log_of(c: Cluster, node: str) -> str:
    return c.exec(node, "cat", LOG, check=False).stdout


def limits_w(c: Cluster, node: str) -> dict[int, float]:
    text = c.exec(node, "cat", f"{STATE}/gpus.json", check=False).stdout
    return {int(m): d["current_w"] for m, d in (json.loads(text)["devices"] if text else {}).items()}


def test_slurm_conf_names_the_installed_wrappers(cluster: Cluster) -> None:
    config = cluster.exec("controller", "scontrol", "show", "config").stdout
    assert f"{HOOKS_DIR}/prolog" in config and f"{HOOKS_DIR}/epilog" in config
    for node in NODES:
        cluster.exec(node, "test", "-x", f"{HOOKS_DIR}/prolog")
        assert "/opt/slurm-green/prolog" not in cluster.exec(node, "cat", f"{HOOKS_DIR}/prolog").stdout


def test_repository_copy_moved_away_the_job_runs_and_the_node_stays_up(cluster: Cluster, site: bytes) -> None:
    node = "node2"
    cluster.exec(node, "mv", "/opt/slurm-green", "/opt/slurm-green.off")
    try:
        job = cluster.sbatch("alice", ["-w", node, "--gres=gpu:1", "-t", "2", "--comment", "green:off"],
                             "echo ran\n")
        state = cluster.wait_for(lambda: (s := cluster.job_state(job)) in DONE and s, 90,
                                 message=f"job {job} finished")
        assert state == "COMPLETED"
        cluster.wait_for(lambda: f"epilog job={job}:" in log_of(cluster, node), 30, message="the Epilog's log line")
        log = log_of(cluster, node)
        assert f"prolog job={job}: /usr/bin/python3 -m slurm_green.gpu.prolog exited with status 1" in log
        assert "No module named 'slurm_green'" in log and "node left in service" in log
        node_state = cluster.exec("controller", "sinfo", "-h", "-n", node, "-o", "%T").stdout.strip()
        assert "drain" not in node_state and node_state in {"idle", "mixed", "allocated", "completing"}, node_state
    finally:
        cluster.sh(node, "[ -e /opt/slurm-green ] || mv /opt/slurm-green.off /opt/slurm-green", check=False)
    cluster.exec(node, "test", "-f", "/opt/slurm-green/pyproject.toml")


def submit_array(c: Cluster, key: bytes, node: str, signed_for_offset: int = 0) -> tuple[int, list[int]]:
    """alice submits a held array of 3 one-GPU tasks; the controller signs and releases it.

    ``signed_for_offset``: sign for another array's id instead (must be ignored)."""
    array = c.sbatch("alice", ["--array=0-2", "--hold", "-w", node, "--gres=gpu:1", "-t", "5",
                               "--comment", "green:cap=yes"], "sleep 300\n")
    token = decision_token.sign(key, array + signed_for_offset, {"cap": 0.6})
    c.exec("controller", "scontrol", "update", f"jobid={array}", f"Comment=green:cap=yes {token}", user="sgreen")
    c.exec("controller", "scontrol", "release", str(array), user="sgreen")

    def running_tasks() -> list[int] | None:
        out = c.exec("controller", "squeue", "-h", "-r", "-j", str(array), "-t", "R", "-o", "%A").stdout.split()
        return sorted(map(int, out)) if len(out) == 3 else None

    return array, c.wait_for(running_tasks, 90, message=f"the 3 tasks of array {array} running")


def test_every_array_task_is_capped_by_the_arrays_decision(cluster: Cluster, site: bytes) -> None:
    array, tasks = submit_array(cluster, site, "node1")
    assert [t for t in tasks if t != array], "Slurm gave no task an id of its own"
    for task in tasks:
        cluster.wait_for(lambda: f"prolog job={task}: GPUs" in log_of(cluster, "node1"), 30,
                         message=f"the Prolog of task {task}")
    log = log_of(cluster, "node1")
    for task in tasks:
        assert f"prolog job={task}: decision token ignored" not in log
        assert any(f"prolog job={task}: GPUs" in line and line.endswith("cap 0.6 of board max")
                   for line in log.splitlines()), task
    assert sorted(limits_w(cluster, "node1").values()).count(240) == 3
    cluster.exec("controller", "scancel", str(array))
    cluster.wait_for(lambda: all(w == 400 for w in limits_w(cluster, "node1").values()), 60,
                     message="every task's GPU restored")


def test_an_array_task_ignores_a_token_signed_for_another_array(cluster: Cluster, site: bytes) -> None:
    array, tasks = submit_array(cluster, site, "node3", signed_for_offset=1000)
    for task in tasks:
        cluster.wait_for(lambda: f"prolog job={task}: decision token ignored" in log_of(cluster, "node3"), 30,
                         message=f"task {task} ignored the other array's token")
    assert all(w == 400 for w in limits_w(cluster, "node3").values())
