"""A running elastic job resized by the live controller: signalled, checkpointed, requeued at
another GPU count, resumed from its checkpoint, finished with every sample; a job that did not
opt in is never touched, and a job that ignores the signal is not requeued.

`slurm-green run` (as the operator sgreen, ``[policy] name = "icefrog"``: GreenFlow that
resizes running elastic jobs, with ``[elastic] requeue``) runs while three of alice's jobs
train on node1 and node2 (elastic_job.py under srun: the training helper's torch-free
pieces). Nothing is pending, so GPUs stand idle that no job waits for, and the controller
grows the elastic jobs from 1 to 2 GPUs (docs/enactment.md, "Resizing running jobs"),
rating the one whose reports say a quarter of its blocks is frozen at that share.
"""

from __future__ import annotations

import json

import pytest
from cluster import Cluster
from controller_site import (DONE, HOST_DIR, IN_CONTAINER, STATE, prepare, start_controller, state_of,
                             stop_controller, store_rows, write_carbon)

pytestmark = [pytest.mark.integration, pytest.mark.contract]  # requeuehold and its restart delay differ by version

TOTAL = 3200   # samples: about 100 s on 1 GPU (8 per 0.25 s step), half that on 2
PROGRESS = "/var/spool/slurm-green/telemetry/progress"
JOB = "/opt/slurm-green/tests/integration/controller/elastic_job.py"


def script(extra: str = "") -> str:
    work = "/tmp/sg-elastic-$SLURM_JOB_ID"
    return (f"export PYTHONPATH=/opt/slurm-green SLURM_GREEN_PROGRESS_DIR={PROGRESS}\n"
            f"srun python3 {JOB} {TOTAL} {work}/ckpt.json {work}.result {extra}\n")


def config(name: str) -> str:
    carbon = write_carbon(0.0, 0.0, name=f"carbon-{name}")
    (HOST_DIR / f"{name}.toml").write_text(
        f'[controller]\ninterval_s = 3\nstate_db = "{STATE}/{name}.db"\n'
        'decision_key_file = "/etc/slurm-green/decision.key"\n'
        f'[carbon]\nsources = ["{carbon}"]\ncache_dir = "{STATE}/cache-{name}"\n'
        # the guards would keep a 1-GPU job at 1 unless 2 GPUs cost at most 1.1 x its energy:
        # loosened, as this test is about enacting a resize, not choosing one
        '[policy]\nname = "icefrog"\ngpu_time_slack = 1.0\n'
        f'[elastic]\nrequeue = true\nprogress_dir = "{PROGRESS}"\ncheckpoint_timeout_s = 40\n'
        'restart_cost_s = 0\nmin_interval_h = 1\n')
    return f"{IN_CONTAINER}/{name}.toml"


def result(c: Cluster, job: int, node: str) -> dict:
    return json.loads(c.sh(node, f"cat /tmp/sg-elastic-{job}.result").stdout)


def test_the_controller_resizes_a_running_elastic_job_by_checkpoint_and_requeue(cluster: Cluster) -> None:
    c = cluster
    prepare(c)
    name = "resize"
    args = ["--gres=gpu:1", "-t", "10", "-J", "resnet50"]
    # pinned, so each resumes where its checkpoint is (node-local /tmp) and each node has room to grow
    elastic = c.sbatch("alice", [*args, "-w", "node1", "--comment", "green:elastic=requeue,gpus=1-2"],
                       script("--frozen=0.25"))
    deaf = c.sbatch("alice", [*args, "-w", "node2", "--comment", "green:elastic=requeue,gpus=1-2"],
                    script("--ignore-signal"))
    fixed = c.sbatch("alice", [*args, "-w", "node2", "--comment", "green:gpus=1-2"], script())
    for job in (elastic, deaf, fixed):
        state_of(c, job, {"RUNNING"}, 60)   # the controller is not running: job_submit.lua's flex=0
    # its first report (written 2 s in) is there before the controller's first tick, which
    # would otherwise decide from the time limit alone, knowing nothing frozen
    c.wait_for(lambda: c.sh("controller", f"test -s {PROGRESS}/{elastic}.progress.json", check=False).returncode == 0,
               60, message=f"job {elastic}'s progress report")
    start_controller(c, config(name))
    try:
        for job in (elastic, deaf, fixed):
            state_of(c, job, DONE, 360)
    finally:
        stop_controller(c)

    resized = result(c, elastic, "node1")
    assert resized["samples"] == TOTAL
    first, second = resized["runs"]
    assert (first["gpus"], first["from"], first["restart"]) == (1, 0, 0)
    assert second["gpus"] == 2 and second["restart"] == 1 and 0 < second["from"] < TOTAL, resized
    kinds = [k for (k,) in store_rows(c, name, f"SELECT kind FROM actions WHERE job_id = {elastic} AND ok = 1")]
    assert kinds[:2] == ["SignalJob", "RequeueHold"] and kinds[-1] == "Release" and "SetGpus" in kinds, kinds
    [(phase, attempts)] = store_rows(c, name, f"SELECT phase, attempts FROM resizes WHERE job_id = {elastic}")
    assert (phase, attempts) == ("done", 1)
    reasons = [r for (r,) in store_rows(c, name, f"SELECT reason FROM decisions WHERE job_id = {elastic}")]
    assert any("grow running job 1 -> 2 GPUs" in r and "25% of its blocks frozen (its report)" in r
               for r in reasons), reasons

    # the job that ignored the signal ran to its end at its size, once: nothing lost, nothing requeued
    ignored = result(c, deaf, "node2")
    assert ignored["samples"] == TOTAL and [r["gpus"] for r in ignored["runs"]] == [1], ignored
    [(phase, note)] = store_rows(c, name, f"SELECT phase, note FROM resizes WHERE job_id = {deaf}")
    assert phase == "abandoned" and "no checkpoint" in note
    # the job that did not opt in was never signalled nor requeued
    untouched = result(c, fixed, "node2")
    assert [r["gpus"] for r in untouched["runs"]] == [1] and untouched["samples"] == TOTAL
    assert store_rows(c, name, f"SELECT kind FROM actions WHERE job_id = {fixed}") == []
