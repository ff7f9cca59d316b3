"""The Slurm adapter against the real cluster: the same assertions on every Slurm version.

The backend runs as `sgreen`, the controller's Slurm operator account (the one
job_submit.lua lets change managed jobs), through `docker exec` into the cluster's
`controller` container; test jobs are submitted as alice.
"""

from __future__ import annotations

import time

import pytest
from cluster import Cluster

from slurm_green.core.actions import (
    ActionError,
    Hold,
    Release,
    SetDecision,
    SetGpus,
    SetNice,
    SetNodes,
    SetStartTime,
    SetTimeLimit,
)
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState, NodeState
from slurm_green.slurm import sdiag, squeue_text
from slurm_green.slurm.cli_backend import CliBackend
from slurm_green.slurm.runner import DockerExecRunner

pytestmark = [pytest.mark.integration, pytest.mark.contract]

TOKEN = "sg1.e30." + "0" * 64
CONTROLLER_USER = "sgreen"


@pytest.fixture
def backend(cluster: Cluster) -> CliBackend:
    return CliBackend(DockerExecRunner(cluster.container("controller"), user=CONTROLLER_USER), timeout_s=60)


def pending_job(cluster: Cluster, *args: str) -> int:
    """A pending GPU job of alice's, deferred by two hours unless ARGS say otherwise."""
    defaults = ["--gres=gpu:2", "-t", "30", "-J", "contract", "--comment", "my own words"]
    if not any(arg.startswith("--hold") for arg in args):
        defaults.append("--begin=now+2hours")
    return cluster.sbatch("alice", [*defaults, *args])


def job_in(snapshot: ClusterSnapshot, job_id: int) -> Job:
    job = snapshot.job(job_id)
    assert job is not None, f"job {job_id} missing from the snapshot"
    return job


def test_snapshot_sees_nodes_with_gpus_and_shards(cluster: Cluster, backend: CliBackend):
    snapshot = backend.snapshot()
    assert snapshot.slurm_version.startswith(cluster.version)
    assert sorted(node.name for node in snapshot.nodes) == ["node1", "node2", "node3", "node4"]
    for node in snapshot.nodes:
        assert node.state is NodeState.IDLE and node.available, node
        # a mixed cluster: node1-2 h100, node3-4 a40 (docker/config/gres.conf)
        assert (node.gpus_total, node.shards_total, node.gpu_type) == (
            4, 16, "h100" if node.name in ("node1", "node2") else "a40")
        assert (node.gpus_allocated, node.gpu_indices_allocated) == (0, ())
        assert node.partitions == ("gpu",)
    (partition,) = snapshot.partitions
    assert (partition.name, partition.default, partition.state) == ("gpu", True, "UP")
    assert partition.nodes == ("node1", "node2", "node3", "node4")
    assert snapshot.gpus_free == 16


def test_pending_job_appears_with_its_fields(cluster: Cluster, backend: CliBackend):
    submitted = time.time()
    job_id = pending_job(cluster)
    job = job_in(backend.snapshot(), job_id)
    assert job.state is JobState.PENDING and not job.held
    assert (job.user, job.partition, job.name) == ("alice", "gpu", "contract")
    assert job.account
    assert (job.gpus_per_node, job.num_nodes, job.shards_per_node) == (2, 1, 0)
    assert job.time_limit_s == 30 * 60
    assert abs(job.submit_time - submitted) < 30
    assert job.start_time is not None and abs(job.start_time - (submitted + 2 * 3600)) < 60
    assert job.nodes == ()
    assert "my own words" in job.comment


def test_running_job_and_node_allocation(cluster: Cluster, backend: CliBackend):
    job_id = cluster.sbatch("alice", ["--gres=gpu:2", "-t", "5", "-w", "node2"])
    cluster.wait_for(lambda: cluster.job_state(job_id) == "RUNNING", timeout=60)
    snapshot = backend.snapshot()
    job = job_in(snapshot, job_id)
    assert job.state is JobState.RUNNING and job.nodes == ("node2",) and job.gpus_per_node == 2
    node2 = next(node for node in snapshot.nodes if node.name == "node2")
    assert node2.gpus_allocated == 2 and len(node2.gpu_indices_allocated) == 2
    assert node2.state in (NodeState.MIXED, NodeState.ALLOCATED)


def test_start_time_moves_to_the_second(cluster: Cluster, backend: CliBackend):
    job_id = pending_job(cluster)
    target = time.time() + 3600
    (result,) = backend.apply([SetStartTime(job_id, target)])
    assert result.ok, result
    job = job_in(backend.snapshot(), job_id)
    assert job.start_time is not None and abs(job.start_time - target) <= 2


def test_one_call_moves_several_jobs(cluster: Cluster, backend: CliBackend):
    first, second = pending_job(cluster), pending_job(cluster)
    target = time.time() + 5400
    dry = CliBackend(backend.runner, dry_run=True)
    assert all(r.ok for r in dry.apply([SetStartTime(first, target), SetStartTime(second, target)]))
    assert len(dry.recorded) == 1 and f"JobId={first},{second}" in dry.recorded[0]
    assert all(r.ok for r in backend.apply([SetStartTime(first, target), SetStartTime(second, target)]))
    snapshot = backend.snapshot()
    for job_id in (first, second):
        assert abs((job_in(snapshot, job_id).start_time or 0) - target) <= 2


def test_gpu_count_nodes_nice_and_decision_change(cluster: Cluster, backend: CliBackend):
    job_id = pending_job(cluster)
    backend.snapshot()
    results = backend.apply([SetGpus(job_id, 3, num_nodes=2), SetNice(job_id, 7), SetDecision(job_id, TOKEN)])
    assert [r.error for r in results] == [None, None, None], results
    job = job_in(backend.snapshot(), job_id)
    assert (job.gpus_per_node, job.num_nodes, job.nice) == (3, 2, 7)
    assert job.comment == f"my own words {TOKEN}"


def test_a_gpu_count_change_keeps_the_jobs_other_gres(cluster: Cluster, backend: CliBackend):
    """``scontrol update Gres=gpu:N`` replaces the job's whole per-node request: the command
    names every other GRES it asked for again (node1-2 have one ``nvme``), its GPU type too."""
    job_id = cluster.sbatch("alice", ["--gres=gpu:h100:2,nvme:1", "-t", "5", "--begin=now+2hours"])
    before = job_in(backend.snapshot(), job_id).tres_per_node
    assert "nvme:1" in before and "gpu:h100:2" in before, before
    assert backend.apply([SetGpus(job_id, 3)])[0].ok
    after = job_in(backend.snapshot(), job_id)
    assert (after.gpus_per_node, after.gpu_type) == (3, "h100")
    assert after.tres_per_node == before.replace("gpu:h100:2", "gpu:h100:3"), (before, after.tres_per_node)


def test_hold_and_release(cluster: Cluster, backend: CliBackend):
    job_id = pending_job(cluster)
    assert backend.apply([Hold(job_id)])[0].ok
    assert job_in(backend.snapshot(), job_id).held
    assert backend.apply([Release(job_id)])[0].ok
    assert not job_in(backend.snapshot(), job_id).held


def test_running_job_gives_not_pending(cluster: Cluster, backend: CliBackend):
    job_id = cluster.sbatch("alice", ["--gres=gpu:1", "-t", "5"])
    cluster.wait_for(lambda: cluster.job_state(job_id) == "RUNNING", timeout=60)
    results = backend.apply([SetStartTime(job_id, time.time() + 3600), SetGpus(job_id, 2)])
    assert [r.error for r in results] == [ActionError.NOT_PENDING] * 2, results


def test_a_decision_reaching_a_job_that_started_meanwhile_changes_nothing_of_it(cluster: Cluster,
                                                                                 backend: CliBackend):
    """The snapshot saw the job pending; it started before the decision's update came. Slurm
    refuses the update (a running job's node list: "Invalid node name specified", not "no longer
    pending"), and the job must keep the token and time limit it runs with: no field of a decision
    it does not run with may take alone (``commands``: one job's fields are never split)."""
    job_id = cluster.sbatch("alice", ["--gres=gpu:1", "-t", "5", "--hold", "--comment", "my own words"])
    nodes = [node.name for node in backend.snapshot().nodes]  # the backend's last snapshot: the job pending
    cluster.exec("controller", "scontrol", "release", str(job_id))
    cluster.wait_for(lambda: cluster.job_state(job_id) == "RUNNING", timeout=60)
    ran_on = cluster.exec("controller", "squeue", "-h", "-j", str(job_id), "-o", "%N").stdout.strip()
    elsewhere = next(name for name in nodes if name != ran_on)
    results = backend.apply([SetDecision(job_id, TOKEN), SetNodes(job_id, (elsewhere,)), SetTimeLimit(job_id, 3600)])
    assert not any(r.ok for r in results), results
    shown = cluster.exec("controller", "scontrol", "show", "job", str(job_id)).stdout
    assert " Comment=my own words" in f" {shown}" and "TimeLimit=00:05:00" in shown, shown


def test_missing_job_gives_job_gone(backend: CliBackend):
    results = backend.apply([SetNice(99_999_999, 1), Hold(99_999_998), SetDecision(99_999_997, TOKEN)])
    assert [r.error for r in results] == [ActionError.JOB_GONE] * 3, results


def test_dry_run_records_and_changes_nothing(cluster: Cluster, backend: CliBackend):
    job_id = pending_job(cluster)
    before = job_in(backend.snapshot(), job_id)
    dry = CliBackend(backend.runner, dry_run=True)
    dry.snapshot()
    results = dry.apply([SetStartTime(job_id, time.time() + 7200), SetGpus(job_id, 4), Hold(job_id)])
    assert all(r.ok for r in results)
    expected = [("scontrol", "update", f"JobId={job_id}"), ("scontrol", "hold", str(job_id))]
    assert [argv[:3] for argv in dry.recorded] == expected
    after = job_in(backend.snapshot(), job_id)
    assert (after.start_time, after.gpus_per_node, after.held) == (before.start_time, before.gpus_per_node, False)


def test_stopped_node_shows_as_not_responding(cluster: Cluster, backend: CliBackend):
    cluster.stop_node("node4")

    def node4_lost():
        node = next(node for node in backend.snapshot().nodes if node.name == "node4")
        return not node.available and (node.state is NodeState.DOWN or "NOT_RESPONDING" in node.flags) and node

    # slurmctld notices after SlurmdTimeout (30 s here) plus a ping round.
    node = cluster.wait_for(node4_lost, timeout=150, interval=3, message="node4 down or not responding")
    assert node.gpus_free == 0


def test_a_job_ended_on_a_node_that_does_not_answer_reads_completing_as_text_and_as_json(
        cluster: Cluster, backend: CliBackend):
    """A job cancelled while its node is stopped cannot finish its Epilog: Slurm keeps it
    COMPLETING (its end state with the flag, ``["CANCELLED", "COMPLETING"]`` in 24.11+ JSON)
    until the node is marked down. Both reads must say COMPLETING: the job still holds the node."""
    job_id = cluster.sbatch("alice", ["--gres=gpu:1", "-t", "5", "-w", "node4"], script="sleep 300\n")
    cluster.wait_for(lambda: cluster.job_state(job_id) == "RUNNING", timeout=60)
    cluster.stop_node("node4")
    cluster.exec("controller", "scancel", str(job_id))
    cluster.wait_for(lambda: cluster.job_state(job_id) == "COMPLETING", timeout=30, interval=1)
    json_jobs = CliBackend(backend.runner, timeout_s=60, text_jobs=False).snapshot().jobs
    text_job = next(job for job in text_read(backend) if job.job_id == job_id)
    assert cluster.job_state(job_id) == "COMPLETING"  # still, after both reads (SlurmdTimeout is 30 s)
    json_job = next(job for job in json_jobs if job.job_id == job_id)
    assert (text_job.state, json_job.state) == (JobState.COMPLETING, JobState.COMPLETING)
    assert text_job.state.is_active


def rpc_counters(cluster: Cluster) -> sdiag.RpcCounts:
    return sdiag.rpc_counts(cluster.exec("controller", "sdiag").stdout)


def snapshot_cost(cluster: Cluster, backend: CliBackend) -> tuple[int, dict[str, int], float]:
    """RPCs the controller's account made for one snapshot, by type (all users), and its wall time."""
    before = rpc_counters(cluster)
    started = time.monotonic()
    backend.snapshot()
    wall_s = time.monotonic() - started
    after = rpc_counters(cluster)
    by_type = sdiag.difference(before.by_type, after.by_type)
    for roots in ("REQUEST_STATS_INFO", "REQUEST_PING"):  # sdiag's own and Docker's health checks
        by_type.pop(roots, None)
    return sdiag.difference(before.by_user, after.by_user).get(CONTROLLER_USER, 0), by_type, wall_s


def test_snapshot_costs_four_rpcs_whatever_the_queue_length(cluster: Cluster, backend: CliBackend):
    backend.snapshot()  # fills the partition cache, as in a running controller
    empty_cost, _, _ = snapshot_cost(cluster, backend)
    # 1,000 separate held jobs (an array would be one squeue record), submitted in one shell loop.
    started = time.monotonic()
    cluster.sh(
        "controller",
        "for i in $(seq 1000); do sbatch --hold --parsable --output=/dev/null --chdir=/tmp -t 10 -J rpc-cost "
        "--gres=gpu:1 --wrap 'sleep 60' >/dev/null || exit 1; done",
        user="alice",
        timeout=900,
    )
    submit_s = time.monotonic() - started
    ours = [job for job in backend.snapshot().pending() if job.name == "rpc-cost"]
    assert len(ours) == 1000, f"{len(ours)} of 1000 jobs pending after {submit_s:.0f} s of sbatch"
    cost, by_type, wall_s = snapshot_cost(cluster, backend)
    json_backend = CliBackend(backend.runner, timeout_s=120, text_jobs=False)
    json_backend.snapshot()
    json_cost, json_by_type, json_wall_s = snapshot_cost(cluster, json_backend)
    print(f"\n[rpc] Slurm {cluster.version}: 1000 sbatch in {submit_s:.1f} s; snapshot {cost} RPCs "
          f"({by_type}) in {wall_s:.2f} s; with squeue --json {json_cost} RPCs in {json_wall_s:.2f} s")
    assert cost == empty_cost == 4, by_type
    assert by_type == {"REQUEST_JOB_INFO": 1, "REQUEST_NODE_INFO": 1, "REQUEST_PARTITION_INFO": 2}
    assert json_cost == 3, json_by_type


def test_a_reservation_is_read_with_its_hours_and_nodes(cluster: Cluster, backend: CliBackend):
    """``scontrol show reservations --oneliner`` with ``SLURM_TIME_FORMAT=%s`` gives epoch
    seconds and a hostlist on every version; a reservation deleted is gone at the next read."""
    cluster.exec("controller", "scontrol", "delete", "reservation=sg-read", check=False)
    before = time.time()
    try:
        cluster.exec("controller", "scontrol", "create", "reservation", "reservationname=sg-read",
                     "starttime=now+1hour", "duration=120", "nodes=node1,node3", "flags=MAINT", "users=root")
        fresh = CliBackend(backend.runner, timeout_s=60)
        [read] = [r for r in fresh.snapshot().reservations if r.name == "sg-read"]
        assert read.nodes == ("node1", "node3") and read.end - read.start == 7200, read
        assert before + 3600 - 60 <= read.start <= time.time() + 3600 + 60, (read, before)
    finally:
        cluster.exec("controller", "scontrol", "delete", "reservation=sg-read", check=False)
    assert not [r for r in CliBackend(backend.runner, timeout_s=60).snapshot().reservations if r.name == "sg-read"]


def text_read(backend: CliBackend) -> tuple[Job, ...]:
    """The jobs as the text read alone gives them (``TextFormatError`` where the backend reads JSON)."""
    delimiter = squeue_text.new_delimiter()
    result = backend.runner.run(squeue_text.argv(delimiter), timeout=60, env=squeue_text.ENV)
    assert result.ok, result.stderr
    return squeue_text.parse_jobs(result.stdout, delimiter)


def held_array(cluster: Cluster, name: str, *released: int) -> int:
    """A held array of three, deferred two hours, with tasks ``released`` (split off: records of their own)."""
    array = cluster.sbatch("alice", ["--hold", "-a", "1-3", "-J", name, "--gres=gpu:1", "-t", "5",
                                     "--begin=now+2hours"])
    for task in released:
        cluster.exec("controller", "scontrol", "release", f"{array}_{task}")
    return array


def test_text_and_json_reads_of_the_same_queue_agree(cluster: Cluster, backend: CliBackend):
    """Odd names and comments, array tasks, several nodes, shards, ended jobs: field for field
    (a pending array's master makes the backend read JSON: the next test)."""
    pending_job(cluster, "--hold", "-J", "two\nlines SG~", "--comment", "mine\nSG0~,N/A")
    cluster.sbatch("alice", ["-J", "N/A", "--nice=50", "-t", "2-00:00:00", "--gpus-per-node=1", "-N", "2",
                             "--begin=now+2hours"])
    cluster.sbatch("bob", ["-a", "1-2", "-J", "shared", "--gres=shard:2", "-t", "5"], script="sleep 30\n")
    fails = cluster.sbatch("bob", ["-J", "fails", "-t", "5"], script="exit 3\n")
    cluster.sbatch("bob", ["-J", "total", "--gpus=3", "--hold", "-t", "5"])
    cluster.sbatch("bob", ["-J", "per-gpu", "--gres=gpu:1", "--cpus-per-gpu=2", "--mem-per-gpu=1000", "--hold", "-t", "5",
                           "--deadline=now+2hours"])
    Cluster.wait_for(lambda: cluster.job_state(fails) == "FAILED", message="the failing job did not end")
    cluster.exec("controller", "scontrol", "delete", "reservation=sg-contract", check=False)
    try:
        cluster.exec("controller", "scontrol", "create", "reservation", "reservationname=sg-contract",
                     "starttime=now", "duration=30", "nodes=node4", "users=alice")
        reserved = cluster.sbatch("alice", ["-J", "reserved", "--reservation=sg-contract", "--hold", "-t", "5"])
        text_jobs = _read_alike(backend)
    finally:
        cluster.exec("controller", "scancel", "-n", "reserved", check=False)
        cluster.exec("controller", "scontrol", "delete", "reservation=sg-contract", check=False)
    assert {"two\nlines SG~", "N/A", "shared", "fails", "total", "per-gpu"} <= {job.name for job in text_jobs}
    assert any(not job.state.is_active for job in text_jobs)
    # CPUs and memory (DefMemPerCPU: 4000 MiB a CPU) are read, not left unknown by both reads
    assert all(job.cpus > 0 and job.memory_mib >= 4000 * job.cpus for job in text_jobs
               if job.state.is_active and job.name != "per-gpu")  # that one asks 1000 MiB a GPU
    # so are CPUs and memory asked per GPU, and the reservation a job runs in, and only that job's
    assert {(job.cpus_per_gpu, job.memory_per_gpu_mib) for job in text_jobs if job.name == "per-gpu"} == {(2, 1000)}
    [ends_by] = [job.deadline for job in text_jobs if job.name == "per-gpu"]  # and its --deadline
    assert ends_by is not None and abs(ends_by - time.time() - 7200) < 600
    assert all(job.deadline is None for job in text_jobs if job.name in ("N/A", "shared", "total"))
    assert {job.job_id for job in text_jobs if job.reservation} == {reserved}
    assert {job.reservation for job in text_jobs} == {"", "sg-contract"}


def _read_alike(backend: CliBackend) -> tuple[Job, ...]:
    """The queue read as text, once it reads the same as JSON."""
    json_backend = CliBackend(backend.runner, timeout_s=60, text_jobs=False)
    text_jobs: tuple[Job, ...] = ()
    for _ in range(5):  # a job that starts or ends between the two reads is read again
        json_jobs = {job.job_id: job for job in json_backend.snapshot().jobs}
        try:
            text_jobs = text_read(backend)
        except squeue_text.TextFormatError:  # the shard array's master, until both its tasks start
            time.sleep(2)
            continue
        if {job.job_id: job for job in text_jobs} == json_jobs:
            break
    assert backend.reads_jobs_as_text, "the text read was refused on this Slurm"
    assert {job.job_id: job for job in text_jobs} == json_jobs
    return text_jobs


def test_a_pending_array_whose_line_hides_a_task_split_off_is_read_as_json(cluster: Cluster, backend: CliBackend):
    """squeue's text folds a task released alone into its pending master's line (the master,
    left with indices 1 and 3, shows ``1-3``; 26.05 folds both of two released): that
    snapshot reads JSON and has the task."""
    held_array(cluster, "folded", 2)
    with pytest.raises(squeue_text.TextFormatError, match="pending job array"):
        text_read(backend)
    json_jobs = CliBackend(backend.runner, timeout_s=60, text_jobs=False).snapshot().jobs
    folded = sorted(job.job_id for job in backend.snapshot().jobs if job.name == "folded")
    assert len(folded) == 2 and folded == sorted(job.job_id for job in json_jobs if job.name == "folded")
