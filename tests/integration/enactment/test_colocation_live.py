"""Co-location on the Docker cluster: the live controller with ``[policy] name = "eaco"`` pairs
two managed jobs that accept sharing, Slurm runs them on one GPU, and a job that refuses
sharing runs alone.

Three 1-GPU jobs of alice, submitted held to their deadline by job_submit.lua: two light
ones with ``green:share=yes`` (EaCO predicts no slowdown for the pair) and one light one
with ``share=no``. One `slurm-green run --once` as the operator sgreen decides and enacts;
the test then checks what each job script saw (SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES, its
node), the limit each Prolog put on the shared GPU against the cap both tokens carry, that
both finish, and the Epilogs' energy of the shared GPU: each job's part, the parts adding up
to the GPU's counter. The nodes run emulated GPUs (gpu.conf written here, removed after).
On Slurm 22.05, which cannot turn whole GPUs into shards, the test checks that no pair is
formed and all three run alone (docs/enactment.md, "Co-location").
"""

from __future__ import annotations

import json

import pytest
from cluster import CLUSTER_SCRIPT, NODES, Cluster
from controller_site import DONE, job_report, prepare, run_once, state_of, store_rows

from slurm_green.core import decision_token

pytestmark = [pytest.mark.integration, pytest.mark.contract]

NODE_STATE = "/var/lib/slurm-green-coloc"
TELEMETRY = f"{NODE_STATE}/telemetry"
GPU_CONF = (f"SLURM_GREEN_GPU_EMULATED_STATE={NODE_STATE}/gpus.json\nSLURM_GREEN_STATE_DIR={NODE_STATE}\n"
            f"SLURM_GREEN_TELEMETRY_DIR={TELEMETRY}\n")
LIGHT, LIGHT2 = "ResNet-18 (batch size 16)", "Recommendation (batch size 512)"
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


def test_the_controller_co_locates_two_jobs_that_accept_sharing_on_one_gpu_and_not_the_one_that_refuses(
        site: bytes, cluster: Cluster) -> None:
    c, key = cluster, site
    submit = ["--gres=gpu:1", "-t", "3"]
    host = c.sbatch("alice", [*submit, "-J", LIGHT, "--comment", "green:flex=20m,share=yes"], SCRIPT)
    guest = c.sbatch("alice", [*submit, "-J", LIGHT2, "--comment", "green:flex=20m,share=yes"], SCRIPT)
    alone = c.sbatch("alice", [*submit, "-J", LIGHT, "--comment", "green:flex=20m,share=no"], SCRIPT)
    run_once(c, "eaco-coloc", "eaco")

    decided = dict(store_rows(c, "eaco-coloc", "SELECT job_id, share_with FROM decisions"))
    if c.version_tuple < (24, 11):
        assert_no_pair_on_2205(c, decided, (host, guest, alone))
        return
    assert decided == {host: guest, guest: host, alone: None}, decided  # as enacted: the pair both ways
    actions = store_rows(c, "eaco-coloc", "SELECT job_id, kind, ok, message FROM actions")
    assert all(ok for _, _, ok, _ in actions), actions
    kinds = {(job, kind) for job, kind, _, _ in actions}
    assert {(host, "ShareGpus"), (guest, "ShareGpus"), (host, "SetNodes"), (guest, "SetNodes")} <= kinds, actions
    assert not {kind for job, kind, _, _ in actions if job == alone} & {"ShareGpus", "SetNodes"}, actions

    for job in (host, guest, alone):
        assert state_of(c, job, DONE, 120) == "COMPLETED"
    got = {job: job_report(c, REPORT, job, 90) for job in (host, guest, alone)}
    assert got[host] == got[guest], got  # one node, one GPU: SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES, host
    assert got[host]["gpus"] == got[host]["cvd"] and got[host]["gpus"].isdigit(), got
    assert (got[alone]["host"], got[alone]["gpus"]) != (got[host]["host"], got[host]["gpus"]), got

    # both tokens carry one cap (EaCO decides none: full power), and that is what the Prologs set
    promised = [token_payload(c, key, job) for job in (host, guest)]
    assert promised == [{"share": guest}, {"share": host}], promised
    node, gpu = got[host]["host"], got[host]["gpus"]
    log = c.sh(node, "cat /var/log/slurm-green/hooks.log").stdout
    for job in (host, guest):
        assert f"prolog job={job}: GPUs [{gpu}] " in log and f"prolog job={job}: gpu {gpu}: " in log, log
    wants = [f"prolog job={job}: gpu {gpu}: 400 W -> 400 W (job wants 400 W" for job in (host, guest)]
    assert all(want in log for want in wants), log  # no cap promised, none set: the board's own limit
    assert sum(f"{want}, shared with 1 job(s))" in log for want in wants) == 1, log  # the second Prolog joined

    # the Epilogs split the shared GPU's energy between the two, and the parts add up to its counter
    def records() -> list[dict] | None:
        text = c.sh(node, f"cat {TELEMETRY}/{host}.{node}.energy.json {TELEMETRY}/{guest}.{node}.energy.json",
                    check=False).stdout
        return [json.loads(line) for line in text.replace("}{", "}\n{").splitlines()] if text.count("{") == 2 else None

    parts = c.wait_for(records, 30, message="both Epilogs left their energy")
    assert all(part["shared"] for part in parts), parts
    counter = json.loads(c.exec(node, "cat", f"{NODE_STATE}/gpus.json").stdout)["devices"][gpu]["energy_j"]
    # the emulated counter runs on after the last Epilog's reading (its own later calls): 0.1 s at 400 W at most
    assert sum(part["energy_j"] for part in parts) == pytest.approx(counter, abs=40), (parts, counter)
    assert min(part["energy_j"] for part in parts) > 0.2 * counter, (parts, counter)  # each its part, not all of it


def assert_no_pair_on_2205(c: Cluster, decided: dict[int, int | None], jobs: tuple[int, ...]) -> None:
    """Slurm 22.05 cannot turn a job's whole GPU into shards (it refuses ``Gres=shard:K`` and
    fakes ``TresPerNode``), so the controller forms no pair there: each job is decided alone,
    starts at once on a GPU of its own and finishes (none waits for a share never enacted)."""
    assert decided == dict.fromkeys(jobs), decided
    actions = store_rows(c, "eaco-coloc", "SELECT job_id, kind, ok FROM actions")
    assert all(ok for *_, ok in actions) and "ShareGpus" not in {kind for _, kind, _ in actions}, actions
    for job in jobs:
        assert state_of(c, job, DONE, 120) == "COMPLETED"
    places = {(got["host"], got["gpus"]) for got in (job_report(c, REPORT, job, 90) for job in jobs)}
    assert len(places) == len(jobs), places
