"""The CLI backend against a scripted runner (the subprocess edge) and captured Slurm output."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence

import pytest
from slurm_captured import FIXTURES, fixture_versions, load_json, nodes_file

from slurm_green.core.actions import (ActionError, Hold, Release, SetDecision, SetGpus, SetNice, SetNodes, SetStartTime,
                                      ShareGpus)
from slurm_green.core.clock import ManualClock
from slurm_green.core.cluster import JobState, Reservation
from slurm_green.slurm.cli_backend import CliBackend
from slurm_green.slurm import squeue_text
from slurm_green.slurm.errors import SlurmError
from slurm_green.slurm.runner import CommandResult, CommandTimeout

NOW = 1_800_000_000.0
TOKEN = "sg1.e30." + "a" * 64
PARTITIONS = "PartitionName=gpu Default=YES MaxTime=UNLIMITED Nodes=node[1-4] State=UP\n"
Reply = Callable[[tuple[str, ...]], tuple[int, str, str]]


class ScriptedRunner:
    """Answers like Slurm would, and remembers every command and its environment."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.calls: list[tuple[str, ...]] = []
        self.envs: list[Mapping[str, str] | None] = []

    def run(self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None) -> CommandResult:
        assert timeout > 0
        self.calls.append(tuple(argv))
        self.envs.append(env)
        code, out, err = self.reply(tuple(argv))
        return CommandResult(tuple(argv), code, out, err)


def squeue_document(*jobs: dict) -> str:
    return json.dumps(
        {"meta": {"slurm": {"version": {"major": "24", "minor": "11", "micro": "5"}}}, "jobs": list(jobs), "errors": []}
    )


# How squeue answers a --Format field it does not know: exit 0, a message, empty values.
NO_TEXT_READ = "squeue: error: Invalid job format specification: tres-freq\n"


def reads(jobs_json: str, nodes_json: str = '{"nodes": []}') -> Reply:
    """Slurm's answers; the text read of jobs is refused, so jobs come from ``jobs_json``."""
    def reply(argv: tuple[str, ...]) -> tuple[int, str, str]:
        if argv[:3] == ("squeue", "--states=all", "--noheader"):
            return 0, "", NO_TEXT_READ
        if argv == ("squeue", "--json", "--states=all"):  # finished jobs too, on every version
            return 0, jobs_json, ""
        if argv[:3] == ("scontrol", "show", "nodes"):
            return 0, nodes_json, ""
        if argv[:3] == ("scontrol", "show", "partitions"):
            return 0, PARTITIONS, ""
        return 0, "", ""

    return reply


def backend(reply: Reply, **kwargs) -> tuple[CliBackend, ScriptedRunner]:
    runner = ScriptedRunner(reply)
    return CliBackend(runner, clock=ManualClock(NOW), **kwargs), runner


@pytest.mark.parametrize("version", fixture_versions())
def test_snapshot_of_captured_output(version):
    folder = FIXTURES / version
    squeue = (folder / "squeue-all.json").read_text()
    nodes = nodes_file(version).read_text()
    cli, runner = backend(reads(squeue, nodes))
    snapshot = cli.snapshot()
    assert snapshot.taken_at == NOW
    assert snapshot.slurm_version.startswith(version)
    assert len(snapshot.jobs) == len(load_json(version, "squeue-all.json")["jobs"])
    assert {JobState.COMPLETED, JobState.RUNNING, JobState.PENDING} <= {job.state for job in snapshot.jobs}
    assert {node.name for node in snapshot.nodes} == {"node1", "node2", "node3", "node4"}
    assert snapshot.partitions[0].default
    assert snapshot.pending() and sum(node.gpus_total for node in snapshot.nodes) == 16
    cli.snapshot()
    # partitions are cached: the second snapshot reads jobs and nodes only; the refused
    # text read of jobs is tried once, then JSON is read straight away
    assert [call[:3] for call in runner.calls].count(("scontrol", "show", "partitions")) == 1
    assert [call[:3] for call in runner.calls].count(("scontrol", "show", "reservations")) == 1
    assert [call[:3] for call in runner.calls].count(("squeue", "--states=all", "--noheader")) == 1
    assert len(runner.calls) == 7


# As 24.11 prints them with SLURM_TIME_FORMAT=%s (seen on the Docker cluster), one ended.
RESERVATIONS = (
    f"ReservationName=maint StartTime={NOW + 3600:.0f} EndTime={NOW + 10800:.0f} Duration=02:00:00 Nodes=node[1-2] "
    "NodeCnt=2 CoreCnt=128 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES TRES=cpu=128 Users=root "
    "Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) MaxStartDelay=(null)\n"
    f"ReservationName=past StartTime={NOW - 7200:.0f} EndTime={NOW - 60:.0f} Duration=02:00:00 Nodes=node3 "
    "State=INACTIVE\n"
    f"ReservationName=lic StartTime={NOW:.0f} EndTime={NOW + 600:.0f} Nodes=(null) Licenses=matlab:1 State=ACTIVE\n"
)


def test_reservations_not_yet_ended_are_read_with_epoch_times_and_cached_like_partitions():
    def reply(argv: tuple[str, ...]) -> tuple[int, str, str]:
        if argv[:3] == ("scontrol", "show", "reservations"):
            return 0, RESERVATIONS, ""
        return reads('{"jobs": []}')(argv)

    cli, runner = backend(reply, partition_ttl_s=900)
    first = cli.snapshot()
    assert first.reservations == (Reservation("maint", NOW + 3600, NOW + 10800, ("node1", "node2")),
                                  Reservation("lic", NOW, NOW + 600, ()))
    [env] = [env for call, env in zip(runner.calls, runner.envs) if call[:3] == ("scontrol", "show", "reservations")]
    assert env is not None and env["SLURM_TIME_FORMAT"] == "%s"
    cli.clock.advance(700)  # "lic" ended; nothing is read again within partition_ttl_s
    assert [r.name for r in cli.snapshot().reservations] == ["maint"]
    assert [call[:3] for call in runner.calls].count(("scontrol", "show", "reservations")) == 1


def test_a_reservation_whose_times_are_not_epoch_seconds_is_left_out_and_logged(caplog):
    local = RESERVATIONS.replace(f"StartTime={NOW + 3600:.0f}", "StartTime=2027-01-15T10:00:00")

    def reply(argv: tuple[str, ...]) -> tuple[int, str, str]:
        if argv[:3] == ("scontrol", "show", "reservations"):
            return 0, local, ""
        return reads('{"jobs": []}')(argv)

    cli, _ = backend(reply)
    assert [r.name for r in cli.snapshot().reservations] == ["lic"]
    assert "reservation maint left out" in caplog.text


def test_a_failed_reservation_read_fails_the_snapshot():
    def reply(argv: tuple[str, ...]) -> tuple[int, str, str]:
        if argv[:3] == ("scontrol", "show", "reservations"):
            return 1, "", "slurm_load_reservations error: Unable to contact slurm controller (connect failure)"
        return reads('{"jobs": []}')(argv)

    cli, _ = backend(reply)
    with pytest.raises(SlurmError, match="show reservations"):
        cli.snapshot()


def test_snapshot_failure_is_typed():
    cli, _ = backend(lambda argv: (1, "", "squeue: error: Unable to contact slurm controller (connect failure)"))
    with pytest.raises(SlurmError) as caught:
        cli.snapshot()
    assert caught.value.error is ActionError.UNREACHABLE


def test_snapshot_timeout_is_typed():
    class Hanging:
        def run(self, argv, *, timeout, env=None):
            raise CommandTimeout(f"{argv[0]} did not answer within {timeout}s")

    with pytest.raises(SlurmError) as caught:
        CliBackend(Hanging(), timeout_s=0.5).snapshot()
    assert caught.value.error is ActionError.UNREACHABLE


def test_garbage_output_is_a_slurm_error():
    cli, _ = backend(lambda argv: (0, "squeue: warning: something\n", ""))
    with pytest.raises(SlurmError):
        cli.snapshot()


JOB_5 = {"job_id": 5, "job_state": ["PENDING"], "comment": "green:flex=6h mine", "tres_per_node": "gres/gpu:a100:2"}


def test_apply_merges_a_jobs_fields_and_runs_under_utc():
    cli, runner = backend(reads(squeue_document(JOB_5)))
    cli.snapshot()
    runner.calls.clear()
    runner.envs.clear()
    results = cli.apply([SetStartTime(5, NOW + 3600), SetGpus(5, 4), SetDecision(5, TOKEN)])
    assert all(result.ok for result in results)
    assert runner.calls == [
        (
            "scontrol",
            "update",
            "JobId=5",
            "StartTime=2027-01-15T09:00:00",
            "Gres=gpu:a100:4",
            f"Comment=green:flex=6h mine {TOKEN}",
        )
    ]
    assert runner.envs == [{"TZ": "UTC0"}]


JOB_5_NVME = {**JOB_5, "tres_per_node": "gres/gpu:a100:2,gres/nvme:1"}


def test_a_gpu_change_keeps_the_jobs_other_gres():
    cli, runner = backend(reads(squeue_document(JOB_5_NVME)))
    cli.snapshot()
    runner.calls.clear()
    assert all(r.ok for r in cli.apply([SetGpus(5, 4, num_nodes=1)]))
    assert runner.calls == [("scontrol", "update", "JobId=5", "Gres=gpu:a100:4,nvme:1", "NumNodes=1")]


def test_a_gpu_change_of_a_request_not_read_entry_by_entry_is_invalid_and_not_sent():
    odd = {**JOB_5, "tres_per_node": "gres/gpu:a100:2,gres/nvme:1 StartTime=now"}
    cli, runner = backend(reads(squeue_document(odd)))
    cli.snapshot()
    runner.calls.clear()
    resize, nice = cli.apply([SetGpus(5, 4, num_nodes=2), SetNice(5, 3)])
    assert resize.error is ActionError.INVALID and "GRES is left as it is" in resize.message
    # the job's other fields wait with it: a decision takes whole or not at all
    assert nice.error is ActionError.BLOCKED and "SetGpus of this job was refused" in nice.message
    assert runner.calls == []


def test_errors_are_typed_per_job_after_a_shared_call_fails():
    def reply(argv):
        if argv[:2] == ("scontrol", "update"):
            ids = argv[2].removeprefix("JobId=").split(",")
            if "9" in ids:
                return 1, "", "Invalid job id specified for job 9"
            if "4" in ids:
                return 1, "", "Job is no longer pending execution for job 4"
        return reads(squeue_document(JOB_5))(argv)

    cli, runner = backend(reply)
    start = NOW + 60
    results = cli.apply([SetStartTime(5, start), SetStartTime(9, start), SetStartTime(4, start), SetNice(4, 3)])
    assert [r.error for r in results] == [None, ActionError.JOB_GONE, ActionError.NOT_PENDING, ActionError.NOT_PENDING]
    updates = [call[2] for call in runner.calls if call[1] == "update"]
    # one shared call for the equal start times, then one per job; job 4's two fields stay merged
    assert updates == ["JobId=5,9", "JobId=5", "JobId=9", "JobId=4"]


def test_a_refused_field_fails_the_jobs_whole_update_and_none_is_sent_alone():
    """A decision takes whole or not at all: were its fields retried one by one, a job that started
    since the snapshot would keep the token and time limit of a decision it does not run with."""
    def reply(argv):
        if any(arg.startswith("Nice=") for arg in argv):
            return 1, "", "Access/permission denied for job 5"
        return 0, "", ""

    cli, runner = backend(reply)
    results = cli.apply([SetStartTime(5, NOW + 60), SetNice(5, -5)])
    assert [r.error for r in results] == [ActionError.PERMISSION_DENIED] * 2
    assert len([call for call in runner.calls if call[1] == "update"]) == 1


def test_unreachable_controller_stops_further_calls():
    cli, runner = backend(
        lambda argv: (1, "", "slurm_update error: Unable to contact slurm controller (connect failure)")
    )
    results = cli.apply([Hold(1), SetNice(2, 1), Release(1)])
    assert [r.error for r in results] == [ActionError.UNREACHABLE] * 3
    assert len(runner.calls) == 1


def test_decision_for_an_unknown_job_reads_its_comment_first():
    def reply(argv):
        if argv[:3] == ("scontrol", "show", "job"):
            return 0, squeue_document({"job_id": 7, "job_state": ["PENDING"], "comment": "theirs"}), ""
        return 0, "", ""

    cli, runner = backend(reply)
    assert cli.apply([SetDecision(7, TOKEN)])[0].ok
    assert runner.calls[-1] == ("scontrol", "update", "JobId=7", f"Comment=theirs {TOKEN}")


def test_decision_for_a_vanished_job_is_job_gone_without_an_update():
    cli, runner = backend(lambda argv: (1, "", "slurm_load_jobs error: Invalid job id specified"))
    result = cli.apply([SetDecision(7, TOKEN)])[0]
    assert result.error is ActionError.JOB_GONE
    assert not [call for call in runner.calls if call[1] == "update"]


def test_second_decision_before_next_snapshot_keeps_the_users_words():
    cli, runner = backend(reads(squeue_document(JOB_5)))
    cli.snapshot()
    cli.apply([SetDecision(5, TOKEN)])
    second = "sg1.two." + "c" * 64
    cli.apply([SetDecision(5, second)])
    assert runner.calls[-1][-1] == f"Comment=green:flex=6h mine {second}"


def test_dry_run_records_and_changes_nothing():
    cli, runner = backend(reads(squeue_document(JOB_5)), dry_run=True)
    cli.snapshot()
    reads_before = list(runner.calls)
    results = cli.apply([Hold(5), SetNice(5, 2), Release(5)])
    assert all(r.ok and r.message.startswith("dry-run") for r in results)
    assert runner.calls == reads_before
    assert cli.recorded == [
        ("scontrol", "hold", "5"),
        ("scontrol", "update", "JobId=5", "Nice=2"),
        ("scontrol", "release", "5"),
    ]


def test_held_job_from_snapshot():
    held = {"job_id": 3, "job_state": ["PENDING"], "hold": True, "state_reason": "JobHeldAdmin"}
    cli, _ = backend(reads(squeue_document(held)))
    job = cli.snapshot().job(3)
    assert job is not None and job.held and job.state is JobState.PENDING


def test_start_time_string_is_what_slurm_would_parse_in_utc():
    cli, runner = backend(lambda argv: (0, "", ""))
    cli.apply([SetStartTime(1, NOW + 1.5)])
    value = re.search(r"StartTime=(\S+)", " ".join(runner.calls[0])).group(1)
    assert value == "2027-01-15T08:00:02"


def test_2205_nodes_come_from_sinfo_once_scontrol_refuses_json():
    nodes = json.dumps({"nodes": [{"name": "node1", "state": "idle", "state_flags": [], "gres": "gpu:a100:4"}]})

    def reply(argv):
        if argv[:3] == ("scontrol", "show", "nodes"):
            return 1, "", "scontrol: unrecognized option '--json'\nTry \"scontrol --help\" for more information"
        if argv == ("sinfo", "--json"):
            return 0, nodes, ""
        return reads(squeue_document())(argv)

    cli, runner = backend(reply)
    assert [node.gpus_total for node in cli.snapshot().nodes] == [4]
    cli.snapshot()
    node_reads = [call for call in runner.calls if call[0] == "sinfo" or call[:3] == ("scontrol", "show", "nodes")]
    assert node_reads == [("scontrol", "show", "nodes", "--json"), ("sinfo", "--json"), ("sinfo", "--json")]


def text_squeue(lines: Callable[[str], str]) -> Reply:
    """A squeue that prints ``lines(delimiter)`` for the text read, with the delimiter it was asked for."""
    def reply(argv):
        if argv[:3] == ("squeue", "--states=all", "--noheader"):
            delimiter = argv[3].split(",")[0].removeprefix("--Format=JobId:0")
            return 0, lines(delimiter), ""
        if argv == ("squeue", "--json", "--states=all"):
            return 0, squeue_document(JOB_5), ""
        return reads(squeue_document())(argv)

    return reply


def job_line(delimiter: str, job_id: str, name: str = "train") -> str:
    values = {key: "N/A" for _, key in squeue_text.FIELDS}
    values.update(job_id=job_id, job_state="PENDING", name=name, comment="green:flex=2h")
    return "".join(values[key] + delimiter for _, key in squeue_text.FIELDS) + "\n"


def test_jobs_are_read_as_text_in_epoch_seconds_when_squeue_prints_them():
    cli, runner = backend(text_squeue(lambda d: job_line(d, "8") + job_line(d, "9", "a\nb")))
    snapshot = cli.snapshot()
    assert [(job.job_id, job.name, job.comment) for job in snapshot.jobs] == [
        (8, "train", "green:flex=2h"), (9, "a\nb", "green:flex=2h")]
    assert ("squeue", "--json", "--states=all") not in runner.calls
    text_env = runner.envs[runner.calls.index(next(c for c in runner.calls if c[0] == "squeue"))]
    assert text_env == {"TZ": "UTC0", "SLURM_TIME_FORMAT": "%s"}


def test_unsound_text_is_read_again_as_json_for_that_snapshot_only():
    answers = iter([lambda d: job_line(d, "8") * 2, lambda d: job_line(d, "8")])
    cli, runner = backend(text_squeue(lambda d: next(answers)(d)))
    assert [job.job_id for job in cli.snapshot().jobs] == [5]  # the repeated id: JSON instead
    assert [job.job_id for job in cli.snapshot().jobs] == [8]  # and text again next time
    assert runner.calls.count(("squeue", "--json", "--states=all")) == 1


def test_a_state_flag_hiding_the_hold_makes_that_snapshot_read_json():
    """Review finding: squeue -O State prints REQUEUE_HOLD instead of PENDING; the text read
    made the job OTHER (no longer pending), while JSON says pending and held."""
    record = {**next(j for j in load_json("24.11", "squeue-all.json")["jobs"] if j["job_id"] == 10),
              "job_state": ["PENDING", "REQUEUE_HOLD"], "state_reason": "JobHoldMaxRequeue"}

    def reply(argv):
        if argv == ("squeue", "--json", "--states=all"):
            return 0, squeue_document(record), ""
        return text_squeue(lambda d: job_line(d, "8") + job_line(d, "10").replace(
            d + "PENDING" + d, d + "REQUEUE_HOLD" + d, 1))(argv)

    cli, runner = backend(reply)
    (job,) = cli.snapshot().jobs
    assert (job.job_id, job.state, job.held) == (10, JobState.PENDING, True)
    assert runner.calls.count(("squeue", "--json", "--states=all")) == 1


def test_a_squeue_without_a_field_is_read_as_json_from_then_on():
    cli, runner = backend(reads(squeue_document(JOB_5)))
    assert [job.job_id for job in cli.snapshot().jobs] == [5]
    cli.snapshot()
    squeues = [call[:3] for call in runner.calls if call[0] == "squeue"]
    assert squeues == [("squeue", "--states=all", "--noheader")] + [("squeue", "--json", "--states=all")] * 2


def test_a_write_prefix_runs_only_the_changes():
    """A site without slurmdbd runs the controller's updates through sudo (docs/deploy.md)."""
    cli, runner = backend(reads(squeue_document(JOB_5)), write_prefix=("sudo", "-n"))
    cli.snapshot()
    assert all(call[0] != "sudo" for call in runner.calls)
    runner.calls.clear()
    assert all(r.ok for r in cli.apply([SetStartTime(5, NOW)]))
    assert runner.calls == [("sudo", "-n", "scontrol", "update", "JobId=5", "StartTime=now")]


# -- co-location: ShareGpus becomes shards of one GPU beside the partner ------------------

NODES_WITH_SHARDS = json.dumps({"nodes": [
    {"name": f"node{i}", "state": ["MIXED"], "gres": "gpu:a100:4(S:0-1),shard:16(S:0-1)", "gres_used": ""}
    for i in (1, 2)]})
PARTNER_ON_SHARDS = {"job_id": 4, "job_state": ["RUNNING"], "tres_per_node": "gres/shard:2", "nodes": "node2"}
PARTNER_WHOLE = {"job_id": 4, "job_state": ["RUNNING"], "tres_per_node": "gres/gpu:1", "nodes": "node2"}


def test_a_share_is_a_shard_request_filling_the_partners_gpu_pinned_in_one_update():
    cli, runner = backend(reads(squeue_document(JOB_5, PARTNER_ON_SHARDS), NODES_WITH_SHARDS))
    cli.snapshot()
    runner.calls.clear()
    results = cli.apply([ShareGpus(5, 4), SetNodes(5, ("node2",)), SetStartTime(5, NOW)])
    assert all(result.ok for result in results), results
    assert runner.calls == [("scontrol", "update", "JobId=5", "Gres=shard:2", "ReqNodeList=node2", "StartTime=now")]


def test_a_share_keeps_the_jobs_other_gres_and_one_not_read_entry_by_entry_is_invalid():
    for tres_per_node, sent in [("gres/gpu:a100:2,gres/nvme:1", "Gres=shard:2,nvme:1"), ("gres/gpu:2,gres/x y:1", None)]:
        job = {**JOB_5, "tres_per_node": tres_per_node}
        cli, runner = backend(reads(squeue_document(job, PARTNER_ON_SHARDS), NODES_WITH_SHARDS))
        cli.snapshot()
        runner.calls.clear()
        share, pin = cli.apply([ShareGpus(5, 4), SetNodes(5, ("node2",))])
        if sent:
            assert share.ok and runner.calls == [("scontrol", "update", "JobId=5", sent, "ReqNodeList=node2")]
        else:
            assert share.error is ActionError.INVALID and pin.error is ActionError.BLOCKED
            assert runner.calls == []


def test_a_pending_pair_takes_half_a_gpu_each():
    partner = {**PARTNER_ON_SHARDS, "job_state": ["PENDING"], "nodes": "", "tres_per_node": "gres/gpu:1"}
    cli, runner = backend(reads(squeue_document(JOB_5, partner), NODES_WITH_SHARDS))
    cli.snapshot()
    runner.calls.clear()
    assert all(r.ok for r in cli.apply([ShareGpus(5, 4), SetNodes(5, ("node1",)), ShareGpus(4, 5),
                                        SetNodes(4, ("node1",))]))
    assert runner.calls == [("scontrol", "update", "JobId=5,4", "Gres=shard:2", "ReqNodeList=node1")]


@pytest.mark.parametrize("partner, nodes, why", [
    (PARTNER_WHOLE, NODES_WITH_SHARDS, "runs on whole GPUs"),
    ({**PARTNER_ON_SHARDS, "tres_per_node": "gres/shard:4"}, NODES_WITH_SHARDS, "holds all 4 shards"),
    (PARTNER_ON_SHARDS, json.dumps({"nodes": [{"name": "node2", "gres": "gpu:a100:4"}]}), "has no gres/shard"),
])
def test_a_share_slurm_cannot_enact_is_invalid_and_nothing_is_sent(partner, nodes, why):
    cli, runner = backend(reads(squeue_document(JOB_5, partner), nodes))
    cli.snapshot()
    runner.calls.clear()
    share, pin = cli.apply([ShareGpus(5, 4), SetNodes(5, ("node2",))])
    assert share.error is ActionError.INVALID and why in share.message
    assert pin.error is ActionError.BLOCKED and runner.calls == []
