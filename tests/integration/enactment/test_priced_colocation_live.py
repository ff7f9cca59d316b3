"""GreenFlow with ``colocate = true`` on the Docker cluster: a job the plan cannot start now
shares the GPU of one it starts now, and Slurm runs the two on that one GPU.

Unmanaged blockers hold every A40 but one (untyped and A40 jobs are planned on the A40 pool,
``policy/gpu_types.py``) for ten minutes by their time limits. Two managed one-GPU A40 jobs of
alice that accept sharing are submitted held to their deadline: GreenFlow starts the first on
the free GPU, and the second, which would wait for a blocker, is cheaper beside it
(``policy/priced_sharing.py``). One `slurm-green run --once` decides and enacts; both scripts
then report one node and one GPU, and the host's time limit was raised for the slowdown its
guest brings. Slurm 22.05 cannot turn whole GPUs into shards (the pair would need
``--gres=shard``, which GreenFlow does not plan), so it runs on 24.11 and later.
"""

from __future__ import annotations

import math

import pytest
from cluster import Cluster
from controller_site import DONE, job_report, prepare, run_once, state_of, store_rows

pytestmark = [pytest.mark.integration]

LIGHT, HOST = "ResNet-18 (batch size 16)", "LM (batch size 80)"
REPORT = "/tmp/sg-pcoloc-$SLURM_JOB_ID"
SCRIPT = f'echo "gpus=$SLURM_JOB_GPUS cvd=$CUDA_VISIBLE_DEVICES host=$SLURMD_NODENAME" > {REPORT}; sleep 5\n'


def test_greenflow_puts_a_job_that_would_wait_on_the_gpu_of_one_it_starts_now(cluster: Cluster) -> None:
    c = cluster
    if c.version_tuple < (24, 11):
        pytest.skip("Slurm 22.05 gives shards only to jobs that asked for them (docs/enactment.md, Co-location)")
    prepare(c)
    blockers = [c.sbatch("bob", ["--gres=gpu:a40:4", "-w", "node3", "-t", "10"], "sleep 600\n"),
                c.sbatch("bob", ["--gres=gpu:a40:3", "-w", "node4", "-t", "10"], "sleep 600\n")]
    try:
        for job in blockers:
            assert state_of(c, job, {"RUNNING"}, 60) == "RUNNING"
        pair = ["--gres=gpu:a40:1", "-t", "3", "--comment", "green:flex=20m,share=yes"]
        host = c.sbatch("alice", [*pair, "-J", HOST], SCRIPT)
        guest = c.sbatch("alice", [*pair, "-J", LIGHT], SCRIPT)
        run_once(c, "gf-coloc", "greenflow", "colocate = true\n")

        decided = dict(store_rows(c, "gf-coloc", "SELECT job_id, share_with FROM decisions"))
        assert decided == {host: guest, guest: host}, decided  # as enacted: the pair both ways
        reasons = dict(store_rows(c, "gf-coloc", "SELECT job_id, reason FROM decisions"))
        assert f"share the GPU of job {host} (starting now)" in reasons[guest], reasons
        actions = store_rows(c, "gf-coloc", "SELECT job_id, kind, ok, message FROM actions")
        assert all(ok for _, _, ok, _ in actions), actions
        # the host runs slower with its guest (and under the pair's cap): its 3-minute limit was
        # raised to its expected run before it started (docs/enactment.md)
        [(expected_s,)] = store_rows(c, "gf-coloc", f"SELECT expected_runtime_s FROM decisions WHERE job_id = {host}")
        assert expected_s > 180 and (host, "SetTimeLimit") in {(j, kind) for j, kind, _, _ in actions}, actions
        limit = c.exec("controller", "squeue", "-h", "-t", "all", "-j", str(host), "-O", "TimeLimit").stdout.strip()
        assert limit == f"{math.ceil(expected_s / 60 - 1e-9)}:00", limit

        got = {job: job_report(c, REPORT, job, 90) for job in (host, guest)}
        assert got[host] == got[guest] and got[host]["host"] == "node4", got  # one node, one GPU
        for job in (host, guest):
            assert state_of(c, job, DONE, 120) == "COMPLETED"
    finally:
        c.exec("controller", "scancel", *map(str, blockers), check=False)
