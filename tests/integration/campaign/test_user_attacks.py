"""Issue 11's hostile user, as a fixed set of attacks by non-root users (alice, bob) on the
live cluster with job_submit.lua, the Prolog/Epilog on emulated GPUs and the controller.
Each attack is one row: what alice (or bob) tries and how we see whether it worked. The
test prints every row and how many succeeded: expected 0.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable

import pytest
from cluster import CLUSTER_SCRIPT, NODES, Cluster
from controller_site import prepare, write_carbon, write_config
from raw_bytes import Submission, sbatch_raw

from slurm_green.core import decision_token

GPU_STATE = "/var/lib/slurm-green"
HOOK_LOG = "/var/log/slurm-green/hooks.log"
CAP_W = 280.0  # the window policy's 0.7 cap of the emulated 400 W board


@pytest.fixture(scope="module")
def site(cluster: Cluster):
    prepare(cluster)
    for node in NODES:
        cluster.sh(node, f"printf 'SLURM_GREEN_GPU_EMULATED_STATE={GPU_STATE}/gpus.json\\n' > /etc/slurm-green/gpu.conf"
                         f" && rm -rf {GPU_STATE} && : > {HOOK_LOG}")
    now = time.time()
    config = write_config(write_carbon(now + 3 * 3600, now + 4 * 3600), "attacks")
    yield cluster, config, decision_token.load_key(CLUSTER_SCRIPT.parent / ".build" / "decision.key")
    for node in NODES:
        cluster.sh(node, f"rm -f /etc/slurm-green/gpu.conf; rm -rf {GPU_STATE}", check=False)


def run_once(c: Cluster, config: str) -> int:
    return c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen",
                  check=False, timeout=120).returncode


def squeue_field(c: Cluster, job: int, fmt: str) -> str:
    return c.exec("controller", "squeue", "-h", "-j", str(job), "-o", fmt, check=False).stdout.strip()


def hook_log(c: Cluster) -> str:
    return "".join(c.exec(node, "cat", HOOK_LOG, check=False).stdout for node in NODES)


def refused(c: Cluster, job: int, change: str, user: str = "alice") -> bool:
    return c.exec("controller", "scontrol", "update", f"jobid={job}", change, user=user, check=False).returncode != 0


def attack_update_fields(c: Cluster, config: str, key: bytes) -> dict[str, bool]:
    """alice changes what the controller decides on her managed job (issue 11.6)."""
    job = c.sbatch("alice", ["--gres=gpu:1", "-t", "5", "--comment", "green:flex=6h"], "sleep 1\n")
    before = squeue_field(c, job, "%D|%b|%n|%x|%S|%k")
    forged = decision_token.sign(secrets.token_bytes(32), job, {"cap": 1.0})
    changes = ["NumNodes=2", "TresPerJob=gres/gpu:8", "TresPerNode=gres/gpu:4", "ReqNodeList=node3",
               "ExcNodeList=node1", "StartTime=now", f"Comment={forged}", "AdminComment=sg:managed=0",
               "Gres=gpu:3", "MinNodes=2"]
    accepted = {f"scontrol update {change.split('=')[0]}=... on her managed job": not refused(c, job, change)
                for change in changes}
    accepted["managed job's fields changed after the refusals"] = squeue_field(c, job, "%D|%b|%n|%x|%S|%k") != before
    return accepted


def attack_tokens(c: Cluster, config: str, key: bytes) -> dict[str, bool]:
    """Copied, forged and foreign tokens (the forgery attempts that held on the independent cluster)."""
    victim = c.sbatch("bob", ["--gres=gpu:1", "-t", "5", "--comment", "green:flex=6h"], "sleep 1\n")
    run_once(c, config)
    stolen = squeue_field(c, victim, "%k").split()[-1]
    assert stolen.startswith("sg1."), "the controller did not decide bob's job"
    copied = c.sbatch("alice", ["--gres=gpu:1", "-t", "5", "--comment", f"green:flex=6h {stolen}"], "sleep 1\n")
    unmanaged = c.sbatch("alice", ["--hold", "--gres=gpu:1", "-t", "5", "--comment", "green:off"], "sleep 1\n")
    c.exec("controller", "scontrol", "update", f"jobid={unmanaged}", f"Comment=mine {stolen}", user="alice",
           check=False)
    forged = decision_token.sign(secrets.token_bytes(32), unmanaged, {"cap": 0.25})
    c.exec("controller", "scontrol", "update", f"jobid={unmanaged}", f"Comment=mine {forged}", user="alice",
           check=False)
    return {
        "another job's token copied into a submitted comment kept": stolen in squeue_field(c, copied, "%k"),
        "a token written into an unmanaged job's comment kept": "sg1." in squeue_field(c, unmanaged, "%k"),
        "bob's decision changed by alice's jobs": squeue_field(c, victim, "%k").split()[-1] != stolen,
    }


def attack_foreign_token_in_prolog(c: Cluster, config: str, key: bytes) -> dict[str, bool]:
    """A valid token of another job that reaches the comment (root writes it here) is ignored."""
    job = c.sbatch("alice", ["--hold", "-w", "node3", "--gres=gpu:1", "-t", "5", "--comment", "green:cap=yes"],
                   "sleep 30\n")
    c.exec("controller", "scontrol", "update", f"jobid={job}", f"Comment={decision_token.sign(key, job + 1000, {'cap': 0.25})}")
    c.exec("controller", "scontrol", "release", str(job))
    c.wait_for(lambda: f"prolog job={job}:" in hook_log(c), 60, message="prolog ran")
    limits = json.loads(c.exec("node3", "cat", f"{GPU_STATE}/gpus.json").stdout)["devices"]
    c.exec("controller", "scancel", str(job), check=False)
    return {"another job's valid token capped this job": any(d["current_w"] == 100 for d in limits.values())}


def attack_environment(c: Cluster, config: str, key: bytes) -> dict[str, bool]:
    """SLURM_GREEN_* settings in the user's environment must not reach the Prolog."""
    # In alice's environment at sbatch (exported by default). Not `--export=ALL,VAR=...`: with any
    # explicit variable, slurmd 24.11 in these unprivileged containers dies at the job's start
    # ("fatal: clone: Operation not permitted"), whatever the variable (SLURM_GREEN_* or FOO).
    out = c.exec("controller", "sbatch", "--parsable", "--output=/dev/null", "--chdir=/tmp", "--hold", "-w", "node4",
                 "--gres=gpu:1", "-t", "5", "--comment", "green:cap=yes", user="alice",
                 input="#!/bin/bash\nsleep 30\n",
                 env={"SLURM_GREEN_DEFAULT_CAP": "0.25", "SLURM_GREEN_GPU_BACKEND": "none"}).stdout
    job = int(out.strip().split(";")[0])
    c.exec("controller", "scontrol", "release", str(job), user="sgreen")
    c.wait_for(lambda: f"prolog job={job}:" in hook_log(c), 60, message="prolog ran")
    limits = json.loads(c.exec("node4", "cat", f"{GPU_STATE}/gpus.json", check=False).stdout or '{"devices": {}}')
    c.exec("controller", "scancel", str(job), check=False)
    return {"SLURM_GREEN_DEFAULT_CAP from the user's environment applied":
            any(d["current_w"] == 100 for d in limits["devices"].values())}


def attack_unmarked(c: Cluster, config: str, key: bytes) -> dict[str, bool]:
    """bob's plain GPU job is not managed unless the site opts unmarked jobs in (issue 11.8)."""
    job = c.sbatch("bob", ["--gres=gpu:1", "-t", "5", "--begin=now+1hour"], "sleep 1\n")
    run_once(c, config)
    admin_comment = c.exec("controller", "scontrol", "show", "job", str(job)).stdout.split("AdminComment=")[-1]
    return {"bob's unmarked job managed (marker or token)":
            admin_comment.startswith("sg:") or "sg1." in squeue_field(c, job, "%k"),
            "bob could not change his own unmarked job": refused(c, job, "StartTime=now+2hours", user="bob")}


def attack_bytes(c: Cluster, config: str, key: bytes) -> dict[str, bool]:
    """Bytes that are not UTF-8 in a comment and a name stopped every tick (issue 11.1)."""
    sbatch_raw(c, "alice", [Submission(b"green:flex=1h caf\xe9", b"odd"), Submission(b"green:flex=1h", b"\xff")])
    return {"controller tick failed on a comment or name that is not UTF-8": run_once(c, config) != 0}


def attack_long_comment(c: Cluster, config: str, key: bytes) -> dict[str, bool]:
    """A comment near 1,024 characters: the token cannot be written; the job must not start uncapped early."""
    now = time.time()
    hot_now = write_config(write_carbon(now - 3600, now + 3600), "attacks-long")
    job = c.sbatch("alice", ["--gres=gpu:1", "-t", "5", "--comment", "green:flex=10m,cap=yes " + "w" * 1000],
                   "sleep 1\n")
    run_once(c, hot_now)
    return {"job started before its deadline without its decided cap": squeue_field(c, job, "%T") != "PENDING"}


def attack_array(c: Cluster, config: str, key: bytes) -> dict[str, bool]:
    """Array tasks ran uncapped: the token was signed for the array, tasks have their own ids (issue 11.2)."""
    now = time.time()
    clean_now = write_config(write_carbon(now - 3600, now + 3600), "attacks-array")
    array = c.sbatch("alice", ["--array=0-2", "--gres=gpu:1", "-t", "5", "--comment", "green:flex=2m"], "sleep 15\n")
    run_once(c, clean_now)
    c.wait_for(lambda: (out := c.exec("controller", "squeue", "-h", "-r", "-t", "all", "-o", "%A %F %T").stdout)
               and sum(1 for line in out.splitlines() if line.split()[1] == str(array)
                       and line.split()[2] != "PENDING") == 3, 120, message="all three tasks started")
    tasks = [int(line.split()[0]) for line in c.exec("controller", "squeue", "-h", "-r", "-t", "all", "-o",
                                                      "%A %F").stdout.splitlines() if line.split()[1] == str(array)]
    for task in tasks:
        c.wait_for(lambda t=task: f"prolog job={t}:" in hook_log(c), 60, message=f"prolog of task {task}")
    log = hook_log(c)
    uncapped = [t for t in tasks if f"prolog job={t}: decision token ignored" in log
                or not any(f"prolog job={t}: gpu" in line and f"-> {CAP_W:.0f} W" in line for line in log.splitlines())]
    return {f"array tasks run uncapped ({len(uncapped)} of {len(tasks)})": bool(uncapped)}


ATTACKS: list[Callable[[Cluster, str, bytes], dict[str, bool]]] = [
    attack_update_fields, attack_tokens, attack_foreign_token_in_prolog, attack_environment, attack_unmarked,
    attack_bytes, attack_long_comment, attack_array,
]


def test_no_user_attack_succeeds(site) -> None:
    c, config, key = site
    outcomes: dict[str, bool] = {}
    for attack in ATTACKS:
        outcomes.update(attack(c, config, key))
        c.scancel_all()
    print(f"\n[user attacks] Slurm {c.version}: {len(outcomes)} attempts, {sum(outcomes.values())} succeeded")
    for what, worked in outcomes.items():
        print(f"  {'SUCCEEDED' if worked else 'failed   '}  {what}")
    assert not any(outcomes.values())
