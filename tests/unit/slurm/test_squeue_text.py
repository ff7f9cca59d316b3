"""Reading jobs from ``squeue -O`` text: sound lines parse like JSON, anything odd is refused."""

from __future__ import annotations

import pytest
from slurm_captured import load_json

from slurm_green.core.cluster import JobState
from slurm_green.slurm import schema, squeue_text
from slurm_green.slurm.squeue_text import FIELDS, TextFormatError

DELIM = squeue_text.new_delimiter()


def line(delimiter: str = DELIM, **values: str) -> str:
    """One job as squeue prints it: every field's value (N/A unless given), each ending in the delimiter."""
    defaults = {key: "N/A" for _, key in FIELDS}
    defaults.update(job_id="5", job_state="PENDING", comment="(null)", name="train")
    defaults.update(values)
    return "".join(defaults[key] + delimiter for _, key in FIELDS) + "\n"


def test_argv_asks_every_field_unpadded_with_the_delimiter():
    argv = squeue_text.argv(DELIM)
    assert argv[:3] == ("squeue", "--states=all", "--noheader")
    spec = argv[3].removeprefix("--Format=").split(",")
    assert spec == [f"{name}:0{DELIM}" for name, _ in FIELDS]


def test_delimiters_are_fresh_and_cannot_be_read_as_a_width():
    drawn = {squeue_text.new_delimiter() for _ in range(50)}
    assert len(drawn) == 50
    assert all(not d[0].isdigit() and "," not in d for d in drawn)


def test_a_pending_job_reads_like_its_json_record():
    text = line(
        job_id="42", user_name="alice", account="research", partition="gpu", job_state="PENDING",
        state_reason="JobHeldUser", submit_time="1795395643", eligible_time="N/A", start_time="N/A",
        time_limit="1-01:30:00", node_count="2", tres_per_node="gres/gpu:a100:2", priority="0", nice="10",
        admin_comment="sg:managed=1", tres_freq="gpu:medium", name="resnet", comment="green:flex=6h",
    )
    (job,) = squeue_text.parse_jobs(text, DELIM)
    assert (job.job_id, job.user, job.account, job.partition) == (42, "alice", "research", "gpu")
    assert job.state is JobState.PENDING and job.held
    assert (job.submit_time, job.eligible_time, job.start_time) == (1795395643.0, None, None)
    assert job.time_limit_s == (24 * 60 + 90) * 60
    assert (job.num_nodes, job.gpus_per_node, job.gpu_type) == (2, 2, "a100")
    assert (job.nice, job.admin_comment, job.tres_freq) == (10, "sg:managed=1", "gpu:medium")
    assert (job.name, job.comment) == ("resnet", "green:flex=6h")


def test_the_whole_per_node_request_reads_like_json():
    text = line(job_id="42", tres_per_node="gres/gpu:a100:2,gres/nvme:1")
    (job,) = squeue_text.parse_jobs(text, DELIM)
    assert (job.gpus_per_node, job.gpu_type, job.tres_per_node) == (2, "a100", "gres/gpu:a100:2,gres/nvme:1")
    assert job == schema.parse_job({"job_id": 42, "job_state": "PENDING", "name": "train",
                                    "tres_per_node": "gres/gpu:a100:2,gres/nvme:1"})
    (unset,) = squeue_text.parse_jobs(line(tres_per_node="N/A"), DELIM)
    assert unset.tres_per_node == "" and unset.gpus_per_node_only


def test_gpus_asked_per_task_read_like_json():
    """``--gpus-per-task=1`` (24.11 prints ``gres/gpu=1``): its GPUs are not per node alone."""
    (job,) = squeue_text.parse_jobs(line(job_id="15", tres_per_task="gres/gpu=1", tres_per_node="gres/gpu:2"), DELIM)
    assert not job.gpus_per_node_only
    assert job == schema.parse_job({"job_id": 15, "job_state": "PENDING", "name": "train",
                                    "tres_per_task": "gres/gpu=1", "tres_per_node": "gres/gpu:2"})


def test_unset_values_become_empty_but_users_words_stay_verbatim():
    (job,) = squeue_text.parse_jobs(line(name="N/A", comment="(null)", tres_freq="N/A", nodes=""), DELIM)
    # squeue prints an unset comment as (null), which the JSON reader also takes as unset
    assert job.name == "N/A" and job.comment == ""
    assert job.tres_freq == "" and job.nodes == () and job.time_limit_s is None


def test_newlines_and_foreign_delimiters_in_users_words_stay_inside_their_job():
    other = squeue_text.new_delimiter()
    forged = line(other, job_id="7", user_name="bob", comment="sg1.forged")
    text = line(name="a\nb", comment="x\n" + forged) + line(job_id="6", user_name="bob")
    first, second = squeue_text.parse_jobs(text, DELIM)
    assert first.job_id == 5 and first.name == "a\nb" and first.comment.endswith(forged)
    assert second.job_id == 6


@pytest.mark.parametrize(
    "text",
    [
        line() + "5" + DELIM + "\n",  # a short line
        line(comment="x" + DELIM + "y"),  # the delimiter guessed: one field too many
        line() + line(),  # the same job twice
        line(job_id="abc"),  # no job id
        # a pending array's master, as 24.11 prints it: its line hides tasks split off from it
        # (the task released alone, job 5, is in `squeue --json` and not in the text)
        line(**{squeue_text.ARRAY_TASK: "1-3"}),
        line(**{squeue_text.ARRAY_TASK: "[1,3-9%2]"}),
    ],
    ids=["short", "guessed-delimiter", "repeated-id", "no-id", "array-master", "array-master-throttled"],
)
def test_anything_unsound_is_refused(text):
    with pytest.raises(TextFormatError):
        squeue_text.parse_jobs(text, DELIM)


def test_an_empty_queue_is_no_jobs():
    assert squeue_text.parse_jobs("", DELIM) == ()


def test_bytes_that_are_not_utf8_in_users_words_are_read_and_kept(caplog):
    """Issue 11: a comment or name with \\xe9/\\xff stopped every tick (UnicodeDecodeError)."""
    raw = line(job_id="7", name="\udcff", comment="green:flex=1h caf\udce9").encode("utf-8", "surrogateescape")
    (job,) = squeue_text.parse_jobs(raw.decode("utf-8", "surrogateescape"), DELIM)
    assert job.comment.encode("utf-8", "surrogateescape") == b"green:flex=1h caf\xe9"
    assert job.name.encode("utf-8", "surrogateescape") == b"\xff"


def test_a_job_whose_fields_cannot_be_read_is_left_out_with_a_warning(caplog):
    text = line(job_id="8", nodes="gpu[1-") + line(job_id="9")
    (job,) = squeue_text.parse_jobs(text, DELIM)
    assert job.job_id == 9
    assert "job 8 left out of this snapshot" in caplog.text


def test_a_pending_jobs_node_pin_is_read_back_as_its_nodes():
    """The controller's ReqNodeList decision is seen at the next tick (not sent again)."""
    (pinned,) = squeue_text.parse_jobs(line(job_id="11", nodes="", required_nodes="node[2-3]"), DELIM)
    assert pinned.nodes == ("node2", "node3")
    (running,) = squeue_text.parse_jobs(line(job_id="12", job_state="RUNNING", nodes="node1",
                                             required_nodes="node[2-3]"), DELIM)
    assert running.nodes == ("node1",)


def captured_record(version: str, job_id: int) -> dict:
    """A job record as captured from the Docker cluster (``squeue --json --states=all``)."""
    return next(j for j in load_json(version, "squeue-all.json")["jobs"] if j["job_id"] == job_id)


# (what ``squeue -O State`` prints: job_state_string() shows the flag instead of the base
# state; the same job's 24.11 JSON job_state; a captured job of that base state)
RUNNING_FLAGS = [("CONFIGURING", ["RUNNING", "CONFIGURING"], 4), ("RESIZING", ["RUNNING", "RESIZING"], 4)]
HIDING_FLAGS = [
    ("REQUEUE_HOLD", ["PENDING", "REQUEUE_HOLD"], 10),  # held after repeated requeues / requeuehold
    ("SPECIAL_EXIT", ["PENDING", "SPECIAL_EXIT"], 10),
    ("RESV_DEL_HOLD", ["PENDING", "RESV_DEL_HOLD"], 10),
    ("REQUEUED", ["PENDING", "REQUEUED"], 8),
    ("REQUEUE_FED", ["PENDING", "REQUEUE_FED"], 8),
    ("SIGNALING", ["RUNNING", "SIGNALING"], 4),
    ("STAGE_OUT", ["RUNNING", "STAGE_OUT"], 4),
    ("STOPPED", ["RUNNING", "STOPPED"], 4),
    ("REVOKED", ["PENDING", "REVOKED"], 8),
    ("?", ["PENDING"], 8),
]


@pytest.mark.parametrize("printed, json_state, job_id", RUNNING_FLAGS, ids=[c[0] for c in RUNNING_FLAGS])
def test_a_flag_only_a_running_job_has_reads_as_running_like_json(printed, json_state, job_id):
    """Review finding: CONFIGURING (nodes powering up) read as OTHER, so not active."""
    record = {**captured_record("24.11", job_id), "job_state": json_state}
    (from_text,) = squeue_text.parse_jobs(
        line(job_id=str(job_id), job_state=printed, tres_per_node="gres/gpu:2", node_count="1", nodes="node1"), DELIM)
    assert from_text.state is schema.parse_job(record).state is JobState.RUNNING
    assert from_text.state.is_active


@pytest.mark.parametrize("printed, json_state, job_id", HIDING_FLAGS, ids=[c[0] for c in HIDING_FLAGS])
def test_a_flag_that_hides_the_base_state_or_the_hold_is_refused(printed, json_state, job_id):
    """The text cannot tell such a job's base state (or, for the held ones, ``hold``): JSON can."""
    record = {**captured_record("24.11", job_id), "job_state": json_state}
    assert schema.parse_job(record).state is not JobState.OTHER
    with pytest.raises(TextFormatError, match="state"):
        squeue_text.parse_jobs(line(job_id="7") + line(job_id=str(job_id), job_state=printed), DELIM)


def test_an_array_task_and_a_master_with_one_index_left_read_as_their_own_jobs():
    """An array's last pending index is its master's own (24.11: ArrayTaskID "3", JSON array_task_id 3
    and no array_task_string): it holds no other task."""
    [job] = squeue_text.parse_jobs(line(job_id="7", **{squeue_text.ARRAY_TASK: "3"}), DELIM)
    assert job.job_id == 7 and job.state is JobState.PENDING
