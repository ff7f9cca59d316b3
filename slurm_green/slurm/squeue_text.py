"""Reading jobs as ``squeue -O`` text: only the fields slurm-green uses.

Why not JSON: ``squeue --json`` renders every field of every job (about 7.8 KB a job
on 24.11), which for 1,000 jobs is about a second of squeue's own CPU, most of a
snapshot's cost. ``-O`` with the fields below prints about 170 bytes a job from the same
REQUEST_JOB_INFO, plus one cheap REQUEST_PARTITION_INFO that squeue's text output always
makes (see ``cli_backend``). Times come as epoch seconds (``SLURM_TIME_FORMAT=%s``).

Why a random delimiter: job names and comments are written by users and may hold any
character, newlines included. Every field ends with a token drawn afresh for each read,
which a job submitted before the read cannot contain except by chance (2^-64). A line
must have exactly one value per field, a job id may appear once, a state must be one the
text can tell (``TEXT_STATES``) and no line may be a pending array's master (its line may
hide tasks split off from it); anything else raises
``TextFormatError`` and the backend reads JSON instead, so odd input costs time, never
correctness, and no job can forge another job's fields.

The values are put under the JSON field names, so ``schema.parse_job`` reads both forms
and the two cannot drift apart.
"""

from __future__ import annotations

import secrets

from slurm_green.core.cluster import Job, JobState
from slurm_green.slurm import schema

ARRAY_TASK = "array task"
# (squeue -O field, the JSON field it stands for). ``JobId`` is each job's own id (array
# tasks included), as ``job_id`` in JSON. 24.11 and later spell the admin comment
# ``admin_comment``; 22.05 accepts the same spelling.
FIELDS = (
    ("JobId", "job_id"),
    ("UserName", "user_name"),
    ("Account", "account"),
    ("Partition", "partition"),
    ("State", "job_state"),
    ("Reason", "state_reason"),
    ("SubmitTime", "submit_time"),
    ("EligibleTime", "eligible_time"),
    ("StartTime", "start_time"),
    ("EndTime", "end_time"),
    ("TimeLimit", "time_limit"),
    ("NumNodes", "node_count"),
    ("NumCPUs", "cpus"),
    ("tres-per-node", "tres_per_node"),
    ("tres-per-job", "tres_per_job"),
    ("tres-per-task", "tres_per_task"),
    ("tres-per-socket", "tres_per_socket"),
    ("tres-alloc", "tres_alloc_str"),
    ("cpus-per-tres", "cpus_per_tres"),
    ("mem-per-tres", "memory_per_tres"),
    ("NodeList", "nodes"),
    ("ReqNodes", "required_nodes"),
    ("PriorityLong", "priority"),
    ("Nice", "nice"),
    ("tres-freq", "tres_freq"),
    ("Reservation", "resv_name"),
    ("Deadline", "deadline"),
    # Checked, not read (``ARRAY_TASK``): a task's index, or a pending master's remaining ones ("[1,3]").
    ("ArrayTaskID", ARRAY_TASK),
    ("admin_comment", "admin_comment"),
    ("Name", "name"),
    ("Comment", "comment"),
)
# Written by users: kept verbatim (a job may well be named "N/A").
FREE_TEXT = frozenset({"name", "comment"})
# What squeue prints for an unset value of the other fields.
_UNSET = frozenset({"N/A", "(null)", "NONE", "Unknown", "n/a"})
# What ``-O State`` may print for the text read to stand: job_state_string() prints a flag
# instead of the base state (src/common/slurm_protocol_defs.c). The base states, COMPLETING
# (its own JobState), and the flags only ever set on a running job. Any other flag
# (REQUEUE_HOLD, SPECIAL_EXIT, RESV_DEL_HOLD: pending and held, which the text cannot tell
# as JSON's ``hold`` does; SIGNALING, STAGE_OUT, REQUEUED, ...: base state unknown) makes
# the snapshot read JSON, which lists the base state beside the flags.
TEXT_STATES = frozenset(
    {state.value for state in JobState if state is not JobState.OTHER}
    | {flag for flag, base in schema.FLAG_BASE_STATES.items() if base is JobState.RUNNING}
)
# squeue's complaint (on stderr, exit status 0) about a field this version lacks.
UNSUPPORTED_FIELD = "Invalid job format specification"
# squeue --helpFormat: its own env var for time formats; TZ-free epoch seconds.
ENV = {"SLURM_TIME_FORMAT": "%s"}


class TextFormatError(ValueError):
    """squeue's text could not be read safely; read JSON instead."""


def new_delimiter() -> str:
    """A fresh field terminator. Starts with a letter: squeue reads leading digits as a width."""
    return "SG" + secrets.token_hex(8) + "~"


def argv(delimiter: str) -> tuple[str, ...]:
    """``squeue`` arguments printing every job (ended ones too) with FIELDS, each ending in ``delimiter``."""
    spec = ",".join(f"{name}:0{delimiter}" for name, _ in FIELDS)
    return ("squeue", "--states=all", "--noheader", "--Format=" + spec)


def parse_jobs(output: str, delimiter: str) -> tuple[Job, ...]:
    """Jobs from ``argv(delimiter)``'s output; ``TextFormatError`` unless every line is sound."""
    jobs: list[Job] = []
    seen: set[int] = set()
    width = len(FIELDS)
    for line in output.split(delimiter + "\n"):
        if not line:
            continue
        values = line.split(delimiter)
        if len(values) != width:
            raise TextFormatError(f"a squeue line has {len(values)} fields, not {width}: {line[:80]!r}")
        record = _record(values)
        task = str(record.pop(ARRAY_TASK))
        if task and not task.isdigit():
            # squeue's text folds every pending task Slurm has split off from an array (one
            # requeued, released or updated alone) into its pending master's line
            # (``_combine_pending_array_tasks``, src/squeue/print.c); ``--array-unique``, which
            # stopped that, is gone from 24.11, and ``-r`` prints the master once per index.
            raise TextFormatError(f"a pending job array's line may hold tasks split off from it: {line[:80]!r}")
        if str(record["job_state"]).upper() not in TEXT_STATES:
            raise TextFormatError(f"a squeue line has state {str(record['job_state'])[:40]!r}, "
                                  f"a flag that hides the base state: {line[:80]!r}")
        job = schema.readable_job(record)
        if job is None:
            continue
        if job.job_id <= 0 or job.job_id in seen:
            raise TextFormatError(f"a squeue line has a missing or repeated job id: {line[:80]!r}")
        seen.add(job.job_id)
        jobs.append(job)
    return tuple(jobs)


def _record(values: list[str]) -> dict[str, object]:
    record: dict[str, object] = {}
    for (_, key), value in zip(FIELDS, values):
        record[key] = value if key in FREE_TEXT or value not in _UNSET else ""
    limit = schema.slurm_duration(str(record["time_limit"]))
    record["time_limit"] = limit / 60.0 if limit is not None else None
    return record
