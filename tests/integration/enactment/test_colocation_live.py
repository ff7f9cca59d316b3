"""Co-location on the Docker cluster: the live controller with ``[policy] name = "eaco"`` pairs
two managed jobs that accept sharing, Slurm runs them on one GPU under the one cap EaCO decided
for the pair, and a job that refuses sharing runs alone.

Three 1-GPU jobs of alice, submitted held to their deadline by job_submit.lua: two with
``green:share=yes`` whose pair EaCO keeps within its slowdown bound at an energy-optimal cap
below full power (LM beside ResNet-18), and one light one with ``share=no``. One
`slurm-green run --once` as the operator sgreen decides and enacts; the test then checks what
each job script saw (SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES, its node), that both tokens carry
one cap, the watts the Prologs applied to the shared GPU (the emulated board's limit while the
pair runs, and the hooks' log) against that cap, that both finish, and the Epilogs' energy of
the shared GPU: each job's part, the parts adding up to the GPU's counter. The nodes run
emulated GPUs (gpu.conf written here, removed after). Slurm 22.05 cannot turn whole GPUs into
shards, so there the pair is submitted with ``--gres=shard:2`` (EaCO counts it as one GPU),
the only way a pair is enacted on it (docs/enactment.md, "Co-location").
"""

from __future__ import annotations

import json
import math

import pytest
from cluster import CLUSTER_SCRIPT, NODES, Cluster
from controller_site import DONE, job_report, prepare, run_once, state_of, store_rows

from slurm_green.core import decision_token
from slurm_green.models.registry import default_registry

pytestmark = [pytest.mark.integration, pytest.mark.contract]

NODE_STATE = "/var/lib/slurm-green-coloc"
TELEMETRY = f"{NODE_STATE}/telemetry"
GPU_CONF = (f"SLURM_GREEN_GPU_EMULATED_STATE={NODE_STATE}/gpus.json\nSLURM_GREEN_STATE_DIR={NODE_STATE}\n"
            f"SLURM_GREEN_TELEMETRY_DIR={TELEMETRY}\n")
LIGHT, HOST = "ResNet-18 (batch size 16)", "LM (batch size 80)"
REPORT = "/tmp/sg-coloc-$SLURM_JOB_ID"
SCRIPT = f'echo "gpus=$SLURM_JOB_GPUS cvd=$CUDA_VISIBLE_DEVICES host=$SLURMD_NODENAME" > {REPORT}; sleep 15\n'


@pytest.fixture(scope="module")
def site(cluster: Cluster):
    prepare(cluster)
    for node in NODES:
        cluster.sh(node, f"rm -rf {NODE_STATE} && printf '%s' '{GPU_CONF}' > /etc/slurm-green/gpu.conf")
    yield decision_token.load_key(CLUSTER_SCRIPT.parent / ".build" / "decision.key")
    for node in NODES:
        cluster.sh(node, f"rm -f /etc/slurm-green/gpu.conf; rm -rf {NODE_STATE}", check=False)


def token_payload(c: Cluster, key: bytes, job: int) -> dict[str, object]:
    comment = c.exec("controller", "squeue", "-h", "-t", "all", "-j", str(job), "-O", "Comment:500").stdout
    token = decision_token.find_token(comment)
    assert token is not None, comment
    return decision_token.verify(key, job, token)


def test_the_controller_co_locates_two_jobs_that_accept_sharing_on_one_gpu_under_one_cap_and_not_the_one_that_refuses(
        site: bytes, cluster: Cluster) -> None:
    c, key = cluster, site
    whole, shards = ["--gres=gpu:1", "-t", "3"], ["--gres=shard:2", "-t", "3"]
    pair = whole if c.version_tuple >= (24, 11) else shards  # 22.05: only jobs asking shards can share
    host = c.sbatch("alice", [*pair, "-J", HOST, "--comment", "green:flex=20m,share=yes"], SCRIPT)
    guest = c.sbatch("alice", [*pair, "-J", LIGHT, "--comment", "green:flex=20m,share=yes"], SCRIPT)
    alone = c.sbatch("alice", [*whole, "-J", LIGHT, "--comment", "green:flex=20m,share=no"], SCRIPT)
    run_once(c, "eaco-coloc", "eaco")

    decided = dict(store_rows(c, "eaco-coloc", "SELECT job_id, share_with FROM decisions"))
    assert decided == {host: guest, guest: host, alone: None}, decided  # as enacted: the pair both ways
    actions = store_rows(c, "eaco-coloc", "SELECT job_id, kind, ok, message FROM actions")
    assert all(ok for _, _, ok, _ in actions), actions
    kinds = {(job, kind) for job, kind, _, _ in actions}
    assert {(host, "SetNodes"), (guest, "SetNodes")} <= kinds, actions
    assert ({(host, "ShareGpus"), (guest, "ShareGpus")} <= kinds) == (pair is whole), actions  # shards already
    assert not {kind for job, kind, _, _ in actions if job == alone} & {"ShareGpus", "SetNodes"}, actions

    # both tokens carry the one cap EaCO decided for the pair, below full power
    promised = [token_payload(c, key, job) for job in (host, guest)]
    cap = promised[0].get("cap")
    assert promised == [{"share": guest, "cap": cap}, {"share": host, "cap": cap}], promised
    assert isinstance(cap, float) and 0 < cap < 1, promised
    # the host runs slower beside its guest and under the pair's cap: its time limit (3 minutes
    # as submitted) was raised to its expected run before it started (docs/enactment.md)
    [(expected_s,)] = store_rows(c, "eaco-coloc", f"SELECT expected_runtime_s FROM decisions WHERE job_id = {host}")
    assert 180 < expected_s <= 1.25 * 180 and (host, "SetTimeLimit") in kinds, (expected_s, actions)
    limit = c.exec("controller", "squeue", "-h", "-t", "all", "-j", str(host), "-O", "TimeLimit").stdout.strip()
    assert limit == f"{math.ceil(expected_s / 60 - 1e-9)}:00", limit

    got = {job: job_report(c, REPORT, job, 90) for job in (host, guest)}
    assert got[host] == got[guest], got  # one node, one GPU: SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES, host
    assert got[host]["gpus"] == got[host]["cvd"] and got[host]["gpus"].isdigit(), got
    node, gpu = got[host]["host"], got[host]["gpus"]

    def board() -> dict[str, float]:
        return json.loads(c.exec(node, "cat", f"{NODE_STATE}/gpus.json").stdout)["devices"][gpu]

    limits = board()
    watts = min(max(float(round(cap * limits["max_w"])), limits["min_w"]), limits["max_w"])  # cap_watts
    assert limits["current_w"] == watts, (limits, watts)  # both started (both wrote), and sleep 15 s

    for job in (host, guest, alone):
        assert state_of(c, job, DONE, 120) == "COMPLETED"
    got[alone] = job_report(c, REPORT, alone, 90)
    assert (got[alone]["host"], got[alone]["gpus"]) != (node, gpu), got
    log = c.sh(node, "cat /var/log/slurm-green/hooks.log").stdout
    for job in (host, guest):
        assert f"prolog job={job}: GPUs [{gpu}] " in log and f"prolog job={job}: gpu {gpu}: " in log, log
    want = f"W -> {watts:g} W (job wants {watts:g} W"
    set_by = [line for line in log.splitlines() if f"gpu {gpu}: " in line and want in line
              and any(f"prolog job={job}:" in line for job in (host, guest))]
    assert len(set_by) == 2 and sum("shared with 1 job(s))" in line for line in set_by) == 1, log  # the second joined
    assert board()["current_w"] == limits["default_w"], board()  # the last Epilog restored the board

    # the Epilogs split the shared GPU's energy between the two, and the parts add up to its counter
    def records() -> list[dict] | None:
        text = c.sh(node, f"cat {TELEMETRY}/{host}.{node}.*energy.json {TELEMETRY}/{guest}.{node}.*energy.json",
                    check=False).stdout
        return [json.loads(line) for line in text.replace("}{", "}\n{").splitlines()] if text.count("{") == 2 else None

    parts = c.wait_for(records, 30, message="both Epilogs left their energy")
    assert all(part["shared"] for part in parts), parts
    counter = board()["energy_j"]
    # the emulated counter runs on after the last Epilog's reading (its own later calls): 0.1 s at 400 W at most
    assert sum(part["energy_j"] for part in parts) == pytest.approx(counter, abs=40), (parts, counter)
    assert min(part["energy_j"] for part in parts) > 0.2 * counter, (parts, counter)  # each its part, not all of it


def test_a_guest_joining_a_running_job_on_shards_raises_that_jobs_time_limit_first(site: bytes, cluster: Cluster) -> None:
    """A job submitted with ``--gres=shard:2`` runs alone (first tick); a second one that
    accepts sharing arrives and EaCO puts it on the first one's GPU (second tick). The running
    job is slowed from then on, so its time limit (3 minutes as submitted) is raised to 3
    minutes times its stretch beside the guest, in whole minutes, before the guest starts."""
    c = cluster
    shards = ["--gres=shard:2", "-t", "3", "--comment", "green:flex=20m,share=yes"]
    host = c.sbatch("alice", [*shards, "-J", HOST], SCRIPT.replace("sleep 15", "sleep 60"))
    run_once(c, "eaco-running-host", "eaco")
    assert state_of(c, host, {"RUNNING"}, 60) == "RUNNING"
    guest = c.sbatch("alice", [*shards, "-J", LIGHT], SCRIPT)
    run_once(c, "eaco-running-host", "eaco")

    decided = dict(store_rows(c, "eaco-running-host", "SELECT job_id, share_with FROM decisions"))
    assert decided == {host: None, guest: host}, decided
    actions = store_rows(c, "eaco-running-host", "SELECT job_id, kind, ok FROM actions ORDER BY rowid")
    assert all(ok for _, _, ok in actions), actions
    host_limits = [i for i, (job, kind, _) in enumerate(actions) if (job, kind) == (host, "SetTimeLimit")]
    guest_start = [i for i, (job, kind, _) in enumerate(actions) if (job, kind) == (guest, "SetStartTime")]
    assert len(host_limits) == 1 and guest_start and host_limits[0] < guest_start[0], actions
    stretch = default_registry().colocated_slowdown(LIGHT, HOST, None, "timeslice")[1]  # the host's cap: none
    limit = c.exec("controller", "squeue", "-h", "-t", "all", "-j", str(host), "-O", "TimeLimit").stdout.strip()
    assert stretch > 1 and limit == f"{math.ceil(3 * stretch - 1e-9)}:00", (limit, stretch)

    got = {job: job_report(c, REPORT, job, 90) for job in (host, guest)}
    assert got[host] == got[guest], got  # the guest joined the running job's node and GPU
    for job in (host, guest):
        assert state_of(c, job, DONE, 150) == "COMPLETED"
