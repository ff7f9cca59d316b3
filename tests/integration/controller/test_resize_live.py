"""A running elastic job resized by the live controller: signalled, checkpointed, requeued at
another GPU count, resumed from its checkpoint, finished with every sample; a job that did not
opt in is never touched, and a job that ignores the signal is not requeued. Where the node
image has PyTorch (24.11), a fourth job runs the helper's PyTorch adapter itself
(green_trainer_job.py: GreenTrainer on a small MLP) on node3 and goes through the same resize.

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
        'restart_cost_s = 0\nmin_interval_h = 1\nsettle_s = 0\n')
    return f"{IN_CONTAINER}/{name}.toml"


def _first_ticks(c: Cluster, name: str) -> tuple[list, str]:
    """What to read when a decision lacks what the job reported: the first ticks' notes, the
    controller's warnings and the reports as they are now (seen once on 22.05 under load)."""
    ticks = store_rows(c, name, "SELECT tick_at, notes FROM ticks ORDER BY tick_at LIMIT 3")
    said = c.sh("controller", f"grep -v ' INFO ' {STATE}/controller.log | tail -n 30; "
                f"ls -l --time-style=+%s {PROGRESS}", check=False).stdout
    return ticks, said


def result(c: Cluster, job: int, node: str) -> dict:
    return json.loads(c.sh(node, f"cat /tmp/sg-elastic-{job}.result").stdout)


def trainer_script() -> str:
    work = "/tmp/sg-trainer-$SLURM_JOB_ID"
    return (f"export PYTHONPATH=/opt/slurm-green SLURM_GREEN_PROGRESS_DIR={PROGRESS}\n"
            f"srun python3 {TRAINER} {STEPS} {work}/ckpt {work}.result\n")


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
    # GreenTrainer itself, where the node image has PyTorch (docker/cluster: TORCH_VERSIONS)
    torch = c.sh("node3", "python3 -c 'import torch'", check=False).returncode == 0
    trainer = [c.sbatch("alice", [*args, "-w", "node3", "--comment", "green:elastic=requeue,gpus=1-2"],
                        trainer_script())] if torch else []
    for job in (elastic, deaf, fixed, *trainer):
        state_of(c, job, {"RUNNING"}, 60)   # the controller is not running: job_submit.lua's flex=0
    # their first reports (written 2 s in) are there before the controller's first tick, which
    # would otherwise decide from the time limit alone, knowing nothing frozen
    for job in (elastic, *trainer):
        c.wait_for(lambda: c.sh("controller", f"test -s {PROGRESS}/{job}.progress.json", check=False).returncode == 0,
                   90, message=f"job {job}'s progress report")
    start_controller(c, config(name))
    try:
        for job in (elastic, deaf, fixed, *trainer):
            state_of(c, job, DONE, 360)
    finally:
        stop_controller(c)
    if trainer:
        _trained_across_the_resize(c, name, trainer[0])

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
               for r in reasons), (reasons, _first_ticks(c, name))
    # what its reports said of its pace at each size (settle_s = 0: every report counts): twice
    # the samples a second on 2 GPUs, as the stand-in trains (docs/enactment.md, measured scaling)
    rates = {gpus: per_s for gpus, per_s in store_rows(
        c, name, f"SELECT gpus, per_s_sum / readings FROM rates WHERE job_id = {elastic}")}
    assert set(rates) == {1, 2} and 1.6 < rates[2] / rates[1] < 2.4, rates

    # the job that ignored the signal ran to its end at its size, once: nothing lost, nothing requeued
    ignored = result(c, deaf, "node2")
    assert ignored["samples"] == TOTAL and [r["gpus"] for r in ignored["runs"]] == [1], ignored
    [(phase, note)] = store_rows(c, name, f"SELECT phase, note FROM resizes WHERE job_id = {deaf}")
    assert phase == "abandoned" and "no checkpoint" in note
    # the job that did not opt in was never signalled nor requeued
    untouched = result(c, fixed, "node2")
    assert [r["gpus"] for r in untouched["runs"]] == [1] and untouched["samples"] == TOTAL
    assert store_rows(c, name, f"SELECT kind FROM actions WHERE job_id = {fixed}") == []



TRAINER = "/opt/slurm-green/tests/integration/controller/green_trainer_job.py"
STEPS = 400  # 8 samples a step: the stand-in's 3200 samples, at the same pace


def _trained_across_the_resize(c: Cluster, name: str, job: int) -> None:
    """GreenTrainer (a small MLP, CPU PyTorch) was grown by the controller: the adapter
    checkpointed on the signal, Slurm requeued it, and it resumed at 2 GPUs from that
    checkpoint to its last step, having learnt."""
    assert c.job_state(job) == "COMPLETED"
    got = json.loads(c.sh("node3", f"cat /tmp/sg-trainer-{job}.result").stdout)
    assert (got["steps"], got["samples"]) == (STEPS, STEPS * 8), got
    first, second = got["runs"]
    assert (first["gpus"], first["from"], first["restart"]) == (1, 0, 0), got
    assert second["gpus"] == 2 and second["restart"] == 1 and 0 < second["from"] < STEPS * 8, got
    assert got["loss"] < 1.0, got  # it trained (the target's variance is 8)
    [(phase, attempts)] = store_rows(c, name, f"SELECT phase, attempts FROM resizes WHERE job_id = {job}")
    assert (phase, attempts) == ("done", 1)
