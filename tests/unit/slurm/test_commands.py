import os
import time
from datetime import UTC, datetime

import pytest
from slurm_captured import fixture_versions, load_json

from slurm_green.core.actions import (Hold, Release, RequeueHold, SetDecision, SetGpuFreq, SetGpus, SetNice, SetNodes,
                                      SetStartTime, SetTimeLimit, ShareGpus, SignalJob)
from slurm_green.core.cluster import Job
from slurm_green.slurm import commands, gres, schema

NOW = 1_800_000_000.0
TOKEN = "sg1.e30." + "a" * 64


def jobs(**by_id):
    return lambda job_id: by_id.get(f"j{job_id}")


def argvs(planned):
    return [" ".join(command.argv) for command in planned]


def test_start_time_is_utc_and_needs_tz_utc():
    start = datetime(2026, 3, 29, 1, 30, 15, tzinfo=UTC).timestamp()  # inside the EU DST switch hour
    assert commands.format_start_time(start, NOW - 10**9) == "2026-03-29T01:30:15"
    assert commands.format_start_time(start + 0.2, NOW - 10**9) == "2026-03-29T01:30:16"  # never early
    assert commands.format_start_time(NOW - 5, NOW) == "now"
    assert commands.SCONTROL_ENV == {"TZ": "UTC0"}


def test_start_time_does_not_depend_on_our_time_zone(monkeypatch):
    start = NOW + 3600
    expected = commands.format_start_time(start, NOW)
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert commands.format_start_time(start, NOW) == expected
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert os.environ.get("TZ") is None


def test_fields_of_one_job_share_one_update():
    job = Job(5, comment="green:flex=6h my run", gpu_type="a100")
    planned = commands.plan(
        [
            (0, SetStartTime(5, NOW + 60)),
            (1, SetGpus(5, 2, num_nodes=1)),
            (2, SetDecision(5, TOKEN)),
            (3, SetNice(5, 10)),
            (4, SetGpuFreq(5, "gpu:medium")),
            (5, SetTimeLimit(5, 5400.5)),
        ],
        jobs(j5=job),
        NOW,
    )
    assert len(planned) == 1
    assert planned[0].argv == (
        "scontrol",
        "update",
        "JobId=5",
        f"StartTime={commands.format_start_time(NOW + 60, NOW)}",
        "Gres=gpu:a100:2",
        "NumNodes=1",
        f"Comment=green:flex=6h my run {TOKEN}",
        "Nice=10",
        "TresFreq=gpu:medium",
        "TimeLimit=91",  # minutes, rounded up: never shorter than asked
    )
    assert planned[0].actions == (0, 1, 2, 3, 4, 5)
    assert planned[0].fallback == ()  # one job's decision takes whole or not at all


def test_decision_replaces_an_old_token_and_keeps_the_users_words():
    old = "sg1.old." + "b" * 64
    planned = commands.plan([(0, SetDecision(5, TOKEN))], jobs(j5=Job(5, comment=f"keep {old} this")), NOW)
    assert planned[0].argv[-1] == f"Comment=keep this {TOKEN}"


def test_identical_changes_to_several_jobs_share_one_call():
    start = NOW + 3600
    planned = commands.plan([(0, SetStartTime(1, start)), (1, SetStartTime(2, start)), (2, SetNice(3, 1))], jobs(), NOW)
    assert argvs(planned)[0].startswith("scontrol update JobId=1,2 StartTime=")
    assert planned[0].actions == (0, 1) and planned[0].job_ids == (1, 2)
    assert [c.job_ids for c in planned[0].fallback] == [(1,), (2,)]
    assert argvs(planned)[1] == "scontrol update JobId=3 Nice=1"
    unbatched = commands.plan([(0, SetStartTime(1, start)), (1, SetStartTime(2, start))], jobs(), NOW, batch_jobs=False)
    assert [c.job_ids for c in unbatched] == [(1,), (2,)]


def test_hold_and_release_keep_their_place_in_the_order():
    planned = commands.plan(
        [(0, Hold(1)), (1, Hold(2)), (2, SetNice(1, 5)), (3, Release(1)), (4, Release(2))], jobs(), NOW
    )
    assert argvs(planned) == [
        "scontrol hold 1,2",
        "scontrol update JobId=1 Nice=5",
        "scontrol release 1,2",
    ]
    assert [c.argv for c in planned[0].fallback] == [("scontrol", "hold", "1"), ("scontrol", "hold", "2")]


def test_gpu_change_without_known_type():
    planned = commands.plan([(0, SetGpus(8, 4))], jobs(), NOW)
    assert planned[0].argv == ("scontrol", "update", "JobId=8", "Gres=gpu:4")


def test_two_decisions_for_one_job_build_on_each_other():
    second = "sg1.two." + "c" * 64
    planned = commands.plan(
        [(0, SetDecision(5, TOKEN)), (1, SetDecision(5, second))], jobs(j5=Job(5, comment="mine")), NOW
    )
    assert planned[0].argv[-1] == f"Comment=mine {second}"
    assert planned[0].fallback == ()


def test_a_placement_is_one_update_with_gpus_node_count_and_node_list():
    """GreenFlow's resize and pin of a pending job, as the Docker cluster's Slurm took it (24.11,
    22.05, 26.05: one update, any order of the fields), never split: a job that started since the
    snapshot would keep the fields Slurm allows on a running job (tests/integration/slurm)."""
    planned = commands.plan([(0, SetGpus(9, 4, num_nodes=2)), (1, SetNodes(9, ("node1", "node2"))),
                             (2, SetStartTime(9, NOW))], jobs(j9=Job(9, gpus_per_node=1)), NOW)
    assert argvs(planned) == ["scontrol update JobId=9 Gres=gpu:4 NumNodes=2 ReqNodeList=node1,node2 "
                              "StartTime=now"]
    assert planned[0].fallback == ()


def test_an_empty_node_list_clears_the_pin():
    planned = commands.plan([(0, SetNodes(9, ()))], jobs(), NOW)
    assert planned[0].argv == ("scontrol", "update", "JobId=9", "ReqNodeList=")


def test_jobs_pinned_to_the_same_nodes_share_a_call_and_to_other_nodes_do_not():
    planned = commands.plan([(0, SetNodes(1, ("node3",))), (1, SetNodes(2, ("node3",))), (2, SetNodes(3, ("node4",)))],
                            jobs(), NOW)
    assert argvs(planned) == ["scontrol update JobId=1,2 ReqNodeList=node3", "scontrol update JobId=3 ReqNodeList=node4"]


def test_a_resize_signals_requeues_then_changes_and_releases_one_job_per_command():
    planned = commands.plan(
        [(0, SignalJob(1)), (1, SignalJob(2, "USR1", batch=True)), (2, RequeueHold(3)), (3, RequeueHold(4)),
         (4, SetGpus(3, 2)), (5, Release(3))], jobs(), NOW)
    assert argvs(planned) == [
        "scancel --signal=USR2 1",           # the job's steps (srun), never --full: bash dies of USR2
        "scancel --signal=USR1 --batch 2",
        "scontrol requeuehold 3",
        "scontrol requeuehold 4",
        "scontrol update JobId=3 Gres=gpu:2",
        "scontrol release 3",
    ]
    assert [c.actions for c in planned] == [(0,), (1,), (2,), (3,), (4,), (5,)]


# -- a GPU change keeps the job's other GRES ------------------------------------------------
# ``scontrol update Gres=`` replaces the job's whole per-node request, so ``Gres=gpu:2`` on a
# job submitted with ``--gres=gpu:4,nvme:1`` would drop ``nvme:1``.


def captured_job(version: str, job_id: int) -> dict:
    return next(job for job in load_json(version, "squeue-all.json")["jobs"] if job["job_id"] == job_id)


def test_gres_update_keeps_the_jobs_other_gres():
    """The review's repro: captured 24.11 job 8 (``--gres=gpu:4``) with a site GRES added in 24.11's spelling."""
    record = dict(captured_job("24.11", 8))
    assert record["tres_per_node"] == "gres/gpu:4"
    record["tres_per_node"] = "gres/gpu:4,gres/nvme:1"
    job = schema.parse_job(record)
    assert job.gpus_per_node == 4
    (command,) = commands.plan([(0, SetGpus(job.job_id, 2))], lambda _: job, now=0.0)
    assert command.argv == ("scontrol", "update", "JobId=8", "Gres=gpu:2,nvme:1")


@pytest.mark.parametrize("tres_per_node, gpu_type, gres_value", [
    ("gres/gpu:4,gres/nvme:1", None, "gpu:2,nvme:1"),                     # 24.11+
    ("gres:gpu:4,gres:nvme:1", None, "gpu:2,nvme:1"),                     # 22.05
    ("gpu:a100:4,nvme:1", "a100", "gpu:a100:2,nvme:1"),                   # pyslurm's gres_text
    ("gres/nvme:1,gres/gpu:h100:4,gres/nic:mlx5:2", "h100", "gpu:h100:2,nvme:1,nic:mlx5:2"),  # type kept
    ("gres/bandwidth:lustre:4G,gres/gpu:4", None, "gpu:2,bandwidth:lustre:4G"),  # a count as written
    ("gres/shard:4,gres/nvme:1", None, "gpu:2,nvme:1"),                   # shards give way to whole GPUs
    ("gres/nvme:1", None, "gpu:2,nvme:1"),                                # GPUs from --gpus (tres_per_job)
    ("gres/gpu:4", None, "gpu:2"),
    ("", None, "gpu:2"),
])
def test_a_gpu_change_rewrites_only_the_gpu_entries(tres_per_node, gpu_type, gres_value):
    job = Job(5, gpus_per_node=4, gpu_type=gpu_type, tres_per_node=tres_per_node)
    (command,) = commands.plan([(0, SetGpus(5, 2, num_nodes=1))], jobs(j5=job), NOW)
    assert command.argv == ("scontrol", "update", "JobId=5", f"Gres={gres_value}", "NumNodes=1")


@pytest.mark.parametrize("version", fixture_versions())
def test_captured_requests_are_rewritten_in_scontrols_spelling(version):
    """Every captured job's request reads back entry by entry; no version's prefix reaches scontrol."""
    for record in load_json(version, "squeue-all.json")["jobs"]:
        job = schema.parse_job(record)
        assert commands.unsafe_gres(job) is None, record["tres_per_node"]
        value = commands.job_gres(job, "gpu:1")
        assert value == "gpu:1" and "gres" not in value, (record["tres_per_node"], value)


def test_a_share_keeps_the_jobs_other_gres():
    job = Job(5, gpus_per_node=1, tres_per_node="gres/gpu:1,gres/nvme:1")
    planned = commands.plan([(0, ShareGpus(5, 4)), (1, SetNodes(5, ("node2",)))], jobs(j5=job), NOW,
                            share=lambda action: "shard:8")
    assert argvs(planned) == ["scontrol update JobId=5 Gres=shard:8,nvme:1 ReqNodeList=node2"]


def test_jobs_with_other_gres_do_not_share_a_gpu_update():
    plain, scratch = Job(1, tres_per_node="gres/gpu:4"), Job(2, tres_per_node="gres/gpu:4,gres/nvme:1")
    planned = commands.plan([(0, SetGpus(1, 2)), (1, SetGpus(2, 2))], jobs(j1=plain, j2=scratch), NOW)
    assert argvs(planned) == ["scontrol update JobId=1 Gres=gpu:2", "scontrol update JobId=2 Gres=gpu:2,nvme:1"]


@pytest.mark.parametrize("tres_per_node", [
    "gres/gpu:4,gres/nvme:1 StartTime=now",     # a second field smuggled into the argument
    "gres/gpu:4,gres/nvme:1\nJobId=1",
    "gres/gpu:4 gres/nvme:1",
    "gres/gpu:4,gres/nvme:1;reboot",
    "gres/gpu:4,,gres/nvme:1",
    "gres/gpu:4,gres/nvme=1",
    "gres/gpu:4(IDX:0-3)",
    "gres/gpu:4,license/matlab:1",
    "gres/gpu:4,gres/nvme:ssd:1:2",
    "gres/gpu:4,gres/1nvme:1",
    "gres/gpu:4,gres/nvme:\u00e9",
    "gres/gpu:4," + "x" * 200,
])
def test_a_request_that_cannot_be_read_entry_by_entry_is_left_alone(tres_per_node):
    job = Job(5, gpus_per_node=4, tres_per_node=tres_per_node)
    assert commands.unsafe_gres(job) is not None
    with pytest.raises(gres.UnsafeGres):
        commands.job_gres(job, "gpu:2")
    with pytest.raises(gres.UnsafeGres):
        commands.plan([(0, SetGpus(5, 2))], jobs(j5=job), NOW)
