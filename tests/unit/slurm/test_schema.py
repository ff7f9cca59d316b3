"""Normalisation of the three JSON schemas into core objects."""

from __future__ import annotations

import json

import pytest
from slurm_captured import FIXTURES, fixture_versions, load_json, nodes_file

from slurm_green.core.cluster import JobState, NodeState
from slurm_green.slurm import schema


def wrapped(number, *, infinite=False, set_=True):
    return {"set": set_, "infinite": infinite, "number": number}


# The same pending job as 22.05 (openapi v0.0.38) and 24.11/26.05 (data_parser) print it.
JOB_2205 = {
    "job_id": 7,
    "name": "train",
    "user_name": "alice",
    "account": "research",
    "partition": "gpu",
    "job_state": "PENDING",
    "state_reason": "JobHeldUser",
    "submit_time": 1700000000,
    "eligible_time": 0,
    "start_time": 0,
    "end_time": 0,
    "time_limit": 90,
    "node_count": 2,
    "nodes": "",
    "tres_per_node": "gres:gpu:a100:2",
    "priority": 0,
    "nice": None,
    "comment": "green:flex=6h mine",
    "admin_comment": "sg:managed=1",
    "unknown_future_field": {"x": 1},
}
JOB_2411 = {
    "job_id": 7,
    "name": "train",
    "user_name": "alice",
    "account": "research",
    "partition": "gpu",
    "job_state": ["PENDING"],
    "state_reason": "JobHeldUser",
    "hold": True,
    "submit_time": wrapped(1700000000),
    "eligible_time": wrapped(0),
    "start_time": wrapped(0),
    "end_time": wrapped(0),
    "time_limit": wrapped(90),
    "node_count": wrapped(2),
    "nodes": "",
    "tres_per_node": "gres/gpu:a100:2",
    "priority": wrapped(0),
    "nice": 0,
    "comment": "green:flex=6h mine",
    "admin_comment": "sg:managed=1",
}


@pytest.mark.parametrize("record", [JOB_2205, JOB_2411], ids=["22.05", "24.11"])
def test_pending_job_reads_the_same_in_every_schema(record):
    job = schema.parse_job(record)
    assert (job.job_id, job.user, job.account, job.partition) == (7, "alice", "research", "gpu")
    assert job.state is JobState.PENDING
    assert job.held
    assert job.submit_time == 1700000000.0
    assert job.eligible_time is None and job.start_time is None
    assert job.time_limit_s == 90 * 60
    assert (job.num_nodes, job.gpus_per_node, job.gpu_type, job.total_gpus) == (2, 2, "a100", 4)
    assert job.nodes == ()
    assert job.comment == "green:flex=6h mine" and job.admin_comment == "sg:managed=1"


def test_running_job_on_two_nodes_with_per_job_gpus():
    job = schema.parse_job(
        {
            "job_id": 9,
            "job_state": ["RUNNING"],
            "node_count": wrapped(2),
            "nodes": "node[2-3]",
            "tres_per_node": "",
            "tres_per_job": "gres/gpu:8",
            "time_limit": wrapped(0, infinite=True, set_=False),
            "start_time": wrapped(1700000100),
        }
    )
    assert job.state is JobState.RUNNING
    assert job.nodes == ("node2", "node3")
    assert job.gpus_per_node == 4 and not job.gpus_per_node_only
    assert job.cpus == 0 and job.cpus_per_node == 1  # no NumCPUs in the record: one a node, as any job
    record = {"job_id": 9, "job_state": "PENDING", "cpus": {"set": True, "number": 9}, "node_count": 2}
    assert schema.parse_job(record).cpus_per_node == 5
    assert schema.parse_job({**record, "job_state": "CANCELLED"}).cpus == 0  # 22.05 leaves it out then
    assert job.time_limit_s is None
    assert job.start_time == 1700000100.0


@pytest.mark.parametrize("fields, mib", [
    ({"tres_req_str": "cpu=2,mem=8000M,node=2,billing=2,gres/gpu=8"}, 8000),  # pending: what it asks
    ({"tres_req_str": "cpu=1,mem=4000M", "tres_alloc_str": "cpu=64,mem=500G,node=1"}, 512000),  # what it holds
    ({"tres_req_str": "cpu=1,mem=1.5G"}, 0), ({}, 0),  # not a count Slurm prints, or none: not known
])
def test_a_jobs_memory_is_read_from_its_tres(fields, mib):
    job = schema.parse_job({"job_id": 9, "job_state": "PENDING", "node_count": 2, **fields})
    assert (job.memory_mib, job.memory_per_node_mib) == (mib, -(-mib // 2))
    assert schema.parse_job({"job_id": 9, "job_state": "COMPLETED", **fields}).memory_mib == 0


@pytest.mark.parametrize("fields, only", [
    ({"tres_per_node": "gres/gpu:2"}, True), ({}, True),  # --gres / --gpus-per-node; no GPU at all
    ({"tres_per_job": "gres/gpu:1"}, False),  # --gpus=1, as 24.11 prints it
    ({"tres_per_task": "gres/gpu=1", "tres_per_node": "gres/gpu:2"}, False),  # --gpus-per-task, then a Gres= update
    ({"tres_per_socket": "gres:gpu:1"}, False),  # 22.05's spelling
    ({"tres_per_job": "gres/nvme:1", "tres_per_node": "gres/gpu:2"}, True),  # another GRES per job: not GPUs
])
def test_a_job_asks_its_gpus_per_node_only_when_no_other_field_holds_them(fields, only):
    """``Gres=`` rewrites the per-node request alone (``Job.gpus_per_node_only``)."""
    assert schema.parse_job({"job_id": 3, "job_state": "PENDING", **fields}).gpus_per_node_only is only


@pytest.mark.parametrize("state, expected", [
    ("CONFIGURING", JobState.RUNNING), ("RESIZING", JobState.RUNNING), ("REQUEUE_HOLD", JobState.PENDING),
    ("SPECIAL_EXIT", JobState.PENDING), ("RESV_DEL_HOLD", JobState.PENDING), ("SIGNALING", JobState.OTHER),
    ("STAGE_OUT", JobState.OTHER), ("REQUEUED", JobState.OTHER), (["RUNNING", "CONFIGURING"], JobState.RUNNING),
    (["PENDING", "REQUEUE_HOLD"], JobState.PENDING), (["COMPLETED", "SIGNALING"], JobState.COMPLETED),
])
def test_a_flag_printed_instead_of_the_base_state_gives_it_where_certain(state, expected):
    """22.05's JSON (and squeue's text) print job_state_string(): the flag, not the base state."""
    assert schema.parse_job({"job_id": 3, "job_state": state}).state is expected


@pytest.mark.parametrize("state", [["COMPLETED", "COMPLETING"], ["CANCELLED", "COMPLETING"],
                                   ["TIMEOUT", "COMPLETING"], ["PENDING", "COMPLETING", "REQUEUED"],
                                   ["RUNNING", "COMPLETING"], "COMPLETING"])
def test_a_completing_job_reads_as_completing_whatever_its_base_state(state):
    """24.11+ JSON lists a completing job's end state first (``["COMPLETED", "COMPLETING"]``),
    where squeue's text and 22.05's JSON print COMPLETING (job_state_string() tests that flag
    first): both reads must agree that the job still holds its nodes until its Epilog ends. A
    job being requeued is PENDING|COMPLETING until then, which the resizer waits out."""
    assert schema.parse_job({"job_id": 3, "job_state": state}).state is JobState.COMPLETING


@pytest.mark.parametrize("tres_per_node", ["gres:gpu:a100:2,gres:nvme:1", "gres/gpu:a100:2,gres/nvme:1"],
                         ids=["22.05", "24.11"])
def test_the_whole_per_node_request_is_kept_beside_the_gpu_count(tres_per_node):
    """``SetGpus`` must keep the job's other GRES (``--gres=gpu:a100:2,nvme:1``), so the job keeps them all."""
    job = schema.parse_job({"job_id": 7, "tres_per_node": tres_per_node})
    assert (job.gpus_per_node, job.gpu_type) == (2, "a100")
    assert job.tres_per_node == tres_per_node
    assert schema.parse_job({"job_id": 7, "tres_per_node": None}).tres_per_node == ""


@pytest.mark.parametrize("version", fixture_versions())
def test_captured_jobs_keep_their_per_node_request(version):
    for record in load_json(version, "squeue-all.json")["jobs"]:
        assert schema.parse_job(record).tres_per_node == (record.get("tres_per_node") or "")


def test_shard_job_and_total_only_request():
    assert schema.parse_job({"job_id": 1, "tres_per_node": "gres/shard:4"}).shards_per_node == 4
    totals = schema.parse_job({"job_id": 1, "node_count": 2, "tres_req_str": "cpu=2,node=2,gres/gpu=6"})
    assert totals.gpus_per_node == 3


def test_missing_and_broken_fields_default():
    job = schema.parse_job({"job_id": "12", "job_state": None, "time_limit": "soon", "priority": {"set": False}})
    assert job.job_id == 12
    assert job.state is JobState.OTHER
    assert job.time_limit_s is None
    assert job.priority == 0 and job.num_nodes == 1 and job.gpus_per_node == 0


NODE_2205 = {
    "name": "node1",
    "state": "mixed",
    "state_flags": ["DRAIN"],
    "reason": "maintenance",
    "gres": "gpu:a100:4(S:0),shard:a100:16(S:0)",
    "gres_used": "gpu:a100:2(IDX:0-1),shard:a100:4(0/4,0/4,4/4,0/4)",
    "features": "a100,nvlink",
    "partitions": ["gpu"],
    "cpus": 64,
    "alloc_cpus": 11,
    "real_memory": 512000,
    "alloc_memory": 44000,
}
NODE_2411 = {
    "name": "node1",
    "state": ["MIXED", "DRAIN"],
    "reason": "maintenance",
    "gres": "gpu:a100:4,shard:a100:16",
    "gres_used": "gpu:a100:2(IDX:0-1),shard:a100:4(0/4,0/4,4/4,0/4)",
    "features": ["a100", "nvlink"],
    "partitions": ["gpu"],
    "next_state_after_reboot": ["INVALID"],
    "cpus": 64,
    "alloc_cpus": 11,
    "real_memory": 512000,
    "alloc_memory": 44000,
}


@pytest.mark.parametrize("record", [NODE_2205, NODE_2411], ids=["22.05", "24.11"])
def test_node_reads_the_same_in_every_schema(record):
    node = schema.parse_node(record)
    assert node.state is NodeState.MIXED
    assert node.flags == {"DRAIN"}
    assert not node.available
    assert (node.gpus_total, node.gpus_allocated, node.gpu_indices_allocated) == (4, 2, (0, 1))
    assert (node.shards_total, node.shards_allocated, node.gpu_type) == (16, 4, "a100")
    assert node.features == ("a100", "nvlink") and node.partitions == ("gpu",)
    assert node.reason == "maintenance"
    assert (node.cpus_total, node.cpus_allocated, node.cpus_free) == (64, 11, 53)
    assert (node.memory_total_mib, node.memory_allocated_mib, node.memory_free_mib) == (512000, 44000, 468000)
    unknown = schema.parse_node({"name": "n", "state": "IDLE"})  # not known: not checked
    assert unknown.cpus_free is None and unknown.memory_free_mib is None
    assert schema.parse_node({**record, "specialized_memory": 2000}).memory_free_mib == 466000  # MemSpecLimit


def test_not_responding_node_is_unavailable():
    node = schema.parse_node({"name": "n", "state": ["IDLE", "NOT_RESPONDING"], "tres": "cpu=4,gres/gpu=4"})
    assert node.state is NodeState.IDLE and "NOT_RESPONDING" in node.flags
    assert node.gpus_total == 4 and node.gpus_free == 0


def test_down_node_in_2205_lower_case():
    state, flags = schema.node_state("down", ["NOT_RESPONDING"])
    assert state is NodeState.DOWN and flags == {"NOT_RESPONDING"}


def test_partitions_from_oneliner_text():
    # one line of `scontrol show partitions --oneliner` (24.11), plus a second made-up one
    text = (
        "PartitionName=gpu AllowGroups=ALL Default=YES QoS=N/A DefaultTime=01:00:00 MaxNodes=UNLIMITED "
        "MaxTime=UNLIMITED Nodes=node[1-4] OverSubscribe=NO State=UP TotalNodes=4 TRES=cpu=256,mem=2000G,node=4,gres/gpu=16\n"
        "PartitionName=short Default=NO MaxNodes=2 MaxTime=1-02:00:00 Nodes=node[3-4] OverSubscribe=EXCLUSIVE State=DRAIN\n\n"
    )
    gpu, short = schema.parse_partitions_text(text)
    assert (gpu.name, gpu.default, gpu.max_time_s, gpu.state) == ("gpu", True, None, "UP")
    assert (gpu.default_time_s, short.default_time_s) == (3600.0, None)  # what a job without --time gets
    assert gpu.nodes == ("node1", "node2", "node3", "node4")
    assert (gpu.max_nodes, short.max_nodes) == (None, 2)
    assert (gpu.exclusive, short.exclusive) == (False, True)  # every job there takes its nodes whole
    # 26.05 prints OverSubscribe=NO for it, and Exclusive=NODE
    [whole] = schema.parse_partitions_text("PartitionName=x Exclusive=NODE OverSubscribe=NO Nodes=n1\n")
    [other] = schema.parse_partitions_text("PartitionName=x Exclusive=USER OverSubscribe=NO Nodes=n1\n")
    assert (whole.exclusive, other.exclusive) == (True, False)
    assert (short.default, short.max_time_s, short.state, short.nodes) == (
        False,
        26 * 3600.0,
        "DRAIN",
        ("node3", "node4"),
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 1800.0), ("05:00", 300.0), ("01:00:00", 3600.0), ("2-00:00:00", 172800.0), ("UNLIMITED", None)],
)
def test_slurm_duration(text, seconds):
    assert schema.slurm_duration(text) == seconds


def test_version_from_meta_of_both_schemas():
    assert (
        schema.slurm_version({"meta": {"slurm": {"version": {"major": "24", "minor": "11", "micro": "5"}}}})
        == "24.11.5"
    )
    assert schema.slurm_version({"meta": {"Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}}}) == "22.05.8"
    assert schema.slurm_version({}) == ""


# -- real output captured from each Slurm version -------------------------------------------


@pytest.mark.parametrize("version", fixture_versions())
def test_captured_nodes(version):
    nodes = schema.parse_nodes(json.loads(nodes_file(version).read_text()))
    assert nodes, "no node parsed"
    for node in nodes:
        assert node.name and node.state is not NodeState.UNKNOWN
        assert (node.gpus_total, node.shards_total, node.gpu_type) == (4, 16, "a100")
        assert 0 <= node.gpus_allocated <= 4
        assert len(node.gpu_indices_allocated) == node.gpus_allocated
        assert node.partitions == ("gpu",)
        assert node.cpus_total == 64 and node.cpus_free is not None
        assert node.memory_total_mib == 512000 and 0 <= node.memory_allocated_mib < 512000


@pytest.mark.parametrize("version", fixture_versions())
@pytest.mark.parametrize("name", ["squeue.json", "squeue-all.json", "scontrol-show-jobs.json"])
def test_captured_jobs(version, name):
    document = load_json(version, name)
    raw = {record["job_id"]: record for record in document["jobs"]}
    jobs = schema.parse_jobs(document)
    assert len(jobs) == len(raw)
    node_names = {node.name for node in schema.parse_nodes(json.loads(nodes_file(version).read_text()))}
    for job in jobs:
        record = raw[job.job_id]
        assert job.state is not JobState.OTHER, record.get("job_state")
        assert job.submit_time > 0
        asks_gpus = "gpu" in str(record.get("tres_per_node")) + str(record.get("tres_per_job"))
        assert (job.gpus_per_node > 0) == asks_gpus or not asks_gpus
        if job.state is JobState.RUNNING:
            assert job.nodes and set(job.nodes) <= node_names
            assert job.start_time and job.start_time >= job.submit_time
        if job.state is JobState.PENDING:
            assert job.nodes == ()
        assert job.comment == (record.get("comment") or "")


@pytest.mark.parametrize("version", fixture_versions())
def test_captured_version_matches_version_txt(version):
    expected = (FIXTURES / version / "scontrol-version.txt").read_text()
    parsed = schema.slurm_version(load_json(version, "squeue.json"))
    assert parsed and parsed in expected and parsed.startswith(version)
