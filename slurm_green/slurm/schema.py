"""Slurm's output (``squeue --json``, ``scontrol show nodes --json``, partitions) to core objects.

Three schemas are in use on the Slurm versions we support:

- 22.05, openapi v0.0.38: plain scalars (``"job_state": "PENDING"``, times as epoch
  integers, 0 meaning unset), node ``state`` lower-case plus a ``state_flags`` list,
  ``tres_per_node`` as ``gres:gpu:2``, features as a comma string, no ``hold`` field.
- 24.11 (data_parser v0.0.42) and 26.05 (v0.0.44): lists for states
  (``["PENDING"]``, ``["IDLE", "DRAIN"]``), numbers wrapped as
  ``{"set": true, "infinite": false, "number": N}``, ``tres_per_node`` as ``gres/gpu:2``.

Every reader here accepts all spellings, ignores unknown fields and defaults missing
ones, so one record that Slurm renders oddly degrades one field, not the snapshot.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from slurm_green.core.cluster import Job, JobState, Node, NodeState, Partition, Reservation
from slurm_green.core.text import displayable
from slurm_green.slurm import gres, hostlist

log = logging.getLogger(__name__)

# Slurm's NO_VAL/INFINITE sentinels (uint32 and uint16), printed raw by some versions.
_SENTINELS = {0xFFFFFFFF, 0xFFFFFFFE, 0xFFFF, 0xFFFE, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFE}
_HELD_REASONS = {"JobHeldUser", "JobHeldAdmin"}

Record = Mapping[str, Any]


def number(value: Any) -> float | None:
    """A number from a scalar, a numeric string or a ``{set, infinite, number}`` wrapper.

    ``None`` for unset, infinite, Slurm sentinels and anything unreadable.
    """
    if isinstance(value, Mapping):
        if value.get("set") is False or value.get("infinite") is True:
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, (int, float)) or math.isnan(value):
        return None
    if value in _SENTINELS:
        return None
    return value


def epoch(value: Any) -> float | None:
    """A POSIX time; Slurm uses 0 for "not set"."""
    seconds = number(value)
    return float(seconds) if seconds else None


def integer(value: Any, default: int = 0) -> int:
    result = number(value)
    return int(result) if result is not None else default


def text(value: Any) -> str:
    """A string field; Slurm's ``null`` and ``(null)`` become ``""``."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    result = str(value)
    return "" if result == "(null)" else result


def words(value: Any) -> tuple[str, ...]:
    """A list field that may also come as a comma string (22.05 features)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip() and part.strip() != "(null)")
    if isinstance(value, Iterable):
        return tuple(str(item) for item in value if item not in (None, ""))
    return ()


def _state_words(*values: Any) -> list[str]:
    """Upper-case state words from strings (``idle``, ``IDLE+DRAIN``) and lists alike."""
    result: list[str] = []
    for value in values:
        for word in words(value) if not isinstance(value, str) else [value]:
            result.extend(part.strip().upper() for part in word.split("+") if part.strip())
    return result


# Flags that Slurm's job_state_string() (src/common/slurm_protocol_defs.c) prints *instead
# of* the base state, whose base state is certain: squeue's text (``-O State``) and 22.05's
# JSON (openapi v0.0.38) print them alone; 24.11+ JSON lists the base state first
# (``["RUNNING", "CONFIGURING"]``). CONFIGURING (nodes booting, PrologSlurmctld) and
# RESIZING are set only on a running job; REQUEUE_HOLD, SPECIAL_EXIT and RESV_DEL_HOLD
# only on a pending, held one. Other flags (SIGNALING, STAGE_OUT, REQUEUED, REQUEUE_FED,
# STOPPED, REVOKED) do not tell the base state and stay OTHER.
FLAG_BASE_STATES = {
    "CONFIGURING": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "REQUEUE_HOLD": JobState.PENDING,
    "SPECIAL_EXIT": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
}


def job_state(value: Any) -> JobState:
    """The base state of ``"PENDING"`` or ``["PENDING", "REQUEUED"]``; flags are dropped.

    A flag alone (``"CONFIGURING"``) gives its base state where that is certain
    (``FLAG_BASE_STATES``), else OTHER. COMPLETING is the exception that wins over the base
    state (24.11+ JSON: ``["COMPLETED", "COMPLETING"]``): job_state_string() tests that flag
    first, so squeue's text and 22.05's JSON print it alone, and the job holds its nodes until
    its Epilog ends; both reads must agree."""
    states = _state_words(value)
    if JobState.COMPLETING.value in states:
        return JobState.COMPLETING
    for word in states:
        state = JobState.parse(word)
        if state is not JobState.OTHER:
            return state
    for word in states:
        if word in FLAG_BASE_STATES:
            return FLAG_BASE_STATES[word]
    return JobState.OTHER


def node_state(state: Any, flags: Any = None) -> tuple[NodeState, frozenset[str]]:
    """Base state and flags from ``["IDLE", "DRAIN"]`` or 22.05's ``"idle"`` + ``state_flags``."""
    base: NodeState | None = None
    rest: set[str] = set()
    for word in _state_words(state, flags):
        parsed = NodeState.parse(word)
        if base is None and (parsed is not NodeState.UNKNOWN or word == "UNKNOWN"):
            base = parsed
        else:
            rest.add(word)
    return base or NodeState.UNKNOWN, frozenset(rest)


def _gpus_per_node(record: Record, num_nodes: int) -> tuple[int, int, str | None]:
    """GPUs and shards per node, and the GPU type, from the most specific field present.

    ``tres_per_node`` holds ``--gres``/``--gpus-per-node``; ``tres_per_job`` holds
    ``--gpus``; ``tres_req_str``/``tres_alloc_str`` hold job totals.
    """
    per_node = text(record.get("tres_per_node"))
    gpus, gpu_type = gres.count(per_node, "gpu")
    shards, _ = gres.count(per_node, "shard")
    if gpus or shards:
        return gpus, shards, gpu_type
    nodes = max(num_nodes, 1)
    for field in ("tres_per_job", "tres_alloc_str", "tres_req_str"):
        total, gpu_type = gres.count(text(record.get(field)), "gpu")
        total_shards, _ = gres.count(text(record.get(field)), "shard")
        if total or total_shards:
            return math.ceil(total / nodes), math.ceil(total_shards / nodes), gpu_type
    return 0, 0, None


#: Where a job's GPUs are asked other than per node: ``--gpus``, ``--gpus-per-task``, ``--gpus-per-socket``.
_OTHER_GPU_FIELDS = ("tres_per_job", "tres_per_task", "tres_per_socket")


def _gpus_per_node_only(record: Record) -> bool:
    """Whether no GPU or shard is asked per job, task or socket (``Job.gpus_per_node_only``)."""
    return not any(gres.count(text(record.get(field)), name)[0]
                   for field in _OTHER_GPU_FIELDS for name in ("gpu", "shard"))


def _memory_mib(record: Record) -> int:
    """The job's memory in MiB over all its nodes: the ``mem`` of the TRES it holds (running),
    or of those it asks for (pending: ``squeue -O tres-alloc`` prints those, JSON's
    ``tres_req_str``), which count a ``--mem-per-cpu`` or ``DefMemPerCPU`` job's CPUs in."""
    for field in ("tres_alloc_str", "tres_req_str"):
        total, _ = gres.count(text(record.get(field)), "mem")
        if total:
            return total // gres.MEBI
    return 0


def parse_job(record: Record) -> Job:
    """One job record of ``squeue --json`` (any supported version)."""
    num_nodes = integer(record.get("node_count"), default=1) or 1
    gpus, shards, gpu_type = _gpus_per_node(record, num_nodes)
    priority = integer(record.get("priority"))
    reason = text(record.get("state_reason"))
    held = record.get("hold")
    if not isinstance(held, bool):
        held = reason in _HELD_REASONS
    time_limit_min = number(record.get("time_limit"))
    state = job_state(record.get("job_state"))
    return Job(
        job_id=integer(record.get("job_id")),
        name=text(record.get("name")),
        user=text(record.get("user_name")),
        account=text(record.get("account")),
        partition=text(record.get("partition")),
        state=state,
        state_reason=reason,
        submit_time=epoch(record.get("submit_time")) or 0.0,
        eligible_time=epoch(record.get("eligible_time")),
        start_time=epoch(record.get("start_time")),
        end_time=epoch(record.get("end_time")),
        time_limit_s=time_limit_min * 60.0 if time_limit_min else None,
        num_nodes=num_nodes,
        # read while the job is active: 22.05's JSON leaves it out for one cancelled before it ran
        cpus=integer(record.get("cpus")) if state.is_active else 0,
        memory_mib=_memory_mib(record) if state.is_active else 0,
        gpus_per_node=gpus,
        shards_per_node=shards,
        gpu_type=gpu_type,
        nodes=_nodes(record),
        priority=priority,
        nice=integer(record.get("nice")),
        held=held,
        comment=text(record.get("comment")),
        admin_comment=text(record.get("admin_comment")),
        tres_freq=text(record.get("tres_freq")),
        tres_per_node=text(record.get("tres_per_node")),
        gpus_per_node_only=_gpus_per_node_only(record),
        cpus_per_gpu=gres.count(text(record.get("cpus_per_tres")), "gpu")[0],
        memory_per_gpu_mib=gres.count(text(record.get("memory_per_tres")), "gpu")[0],
        reservation=text(record.get("resv_name")),
        deadline=epoch(record.get("deadline")),
    )


def _nodes(record: Record) -> tuple[str, ...]:
    """The nodes a job runs on, or a pending job's pin (``ReqNodeList``, the controller's
    node decision): Slurm lists no nodes for a pending job, only the ones it must get."""
    allocated = text(record.get("nodes"))
    return hostlist.expand(allocated or text(record.get("required_nodes")))


def parse_node(record: Record) -> Node:
    """One node record of ``scontrol show nodes --json`` (any supported version)."""
    state, flags = node_state(record.get("state"), record.get("state_flags"))
    configured = text(record.get("gres"))
    used = text(record.get("gres_used"))
    gpus_total, gpu_type = gres.count(configured, "gpu")
    shards_total, _ = gres.count(configured, "shard")
    if not configured:
        gpus_total, gpu_type = gres.count(text(record.get("tres")), "gpu")
        shards_total, _ = gres.count(text(record.get("tres")), "shard")
    gpus_allocated, _ = gres.count(used or text(record.get("tres_used")), "gpu")
    shards_allocated, _ = gres.count(used or text(record.get("tres_used")), "shard")
    return Node(
        name=text(record.get("name")),
        state=state,
        flags=flags,
        reason=text(record.get("reason")),
        gpus_total=gpus_total,
        gpus_allocated=gpus_allocated,
        gpu_indices_allocated=gres.used_indices(used),
        gpu_type=gpu_type,
        shards_total=shards_total,
        shards_allocated=shards_allocated,
        features=words(record.get("features")),
        partitions=words(record.get("partitions")),
        cpus_total=integer(record.get("cpus")),
        cpus_allocated=integer(record.get("alloc_cpus")),
        # what jobs may take: RealMemory less MemSpecLimit (kept for the node's daemons)
        memory_total_mib=max(0, integer(record.get("real_memory")) - integer(record.get("specialized_memory"))),
        memory_allocated_mib=integer(record.get("alloc_memory")),
    )


def slurm_duration(value: str) -> float | None:
    """Seconds from Slurm's ``[D-]HH:MM:SS`` (``MM:SS``, bare minutes); ``UNLIMITED`` gives ``None``."""
    value = value.strip()
    if not value or value.upper() in ("UNLIMITED", "INFINITE", "NONE", "N/A"):
        return None
    days, _, clock = value.rpartition("-")
    try:
        parts = [int(part) for part in clock.split(":")]
        day_count = int(days) if days else 0
    except ValueError:
        return None
    if len(parts) == 1:
        hours, minutes, seconds = 0, parts[0], 0
    elif len(parts) == 2:
        hours, (minutes, seconds) = 0, parts
    else:
        hours, minutes, seconds = parts[-3:]
    return float(((day_count * 24 + hours) * 60 + minutes) * 60 + seconds)


def parse_partitions_text(output: str) -> tuple[Partition, ...]:
    """Partitions from ``scontrol show partitions --oneliner``.

    Text rather than JSON because 24.11's JSON leaves out the Default flag; the
    one-line ``Key=Value`` form is the same on 22.05, 24.11 and 26.05.
    """
    partitions: list[Partition] = []
    for line in output.splitlines():
        fields = dict(token.split("=", 1) for token in line.split() if "=" in token)
        if "PartitionName" not in fields:
            continue
        partitions.append(
            Partition(
                name=fields["PartitionName"],
                nodes=hostlist.expand(fields.get("Nodes")),
                state=fields.get("State", "UP").upper(),
                default=fields.get("Default", "NO").upper() == "YES",
                max_time_s=slurm_duration(fields.get("MaxTime", "")),
                default_time_s=slurm_duration(fields.get("DefaultTime", "")),
                max_nodes=_count(fields.get("MaxNodes", "")),
                exclusive=(fields.get("OverSubscribe", "").upper().startswith("EXCLUSIVE")  # 22.05, 24.11
                           or fields.get("Exclusive", "").upper() == "NODE"),  # 26.05
            )
        )
    return tuple(partitions)


def parse_reservations_text(output: str) -> tuple[Reservation, ...]:
    """Reservations from ``scontrol show reservations --oneliner`` run with
    ``SLURM_TIME_FORMAT=%s`` (start and end as epoch seconds; the same on 22.05, 24.11 and
    26.05). A line whose times cannot be read is left out, and logged: the planner then knows
    less, as before reservations were read, never something wrong."""
    reservations: list[Reservation] = []
    for line in output.splitlines():
        fields = dict(token.split("=", 1) for token in line.split() if "=" in token)
        if "ReservationName" not in fields:
            continue
        start, end = number(fields.get("StartTime")), number(fields.get("EndTime"))
        if start is None or end is None:
            log.warning("reservation %s left out: its times are not epoch seconds (%s, %s)",
                        fields["ReservationName"], fields.get("StartTime"), fields.get("EndTime"))
            continue
        reservations.append(Reservation(name=fields["ReservationName"], start=float(start), end=float(end),
                                        nodes=hostlist.expand(fields.get("Nodes"))))
    return tuple(reservations)


def _count(value: str) -> int | None:
    """A positive count (``MaxNodes=2``); None for ``UNLIMITED`` and anything unreadable."""
    return int(value) if value.isdigit() and int(value) > 0 else None


def slurm_version(document: Record) -> str:
    """``"24.11.5"`` from a document's ``meta`` (``meta.slurm`` or 22.05's ``meta.Slurm``)."""
    meta = document.get("meta")
    if not isinstance(meta, Mapping):
        return ""
    slurm = meta.get("slurm") or meta.get("Slurm")
    if not isinstance(slurm, Mapping):
        return ""
    version = slurm.get("version")
    if isinstance(version, Mapping) and {"major", "minor"} <= version.keys():
        parts = [version.get("major"), version.get("minor"), version.get("micro")]
        return ".".join(str(part).zfill(2) if i == 1 else str(part) for i, part in enumerate(parts) if part is not None)
    return text(slurm.get("release"))


def _records(document: Record, key: str) -> list[Record]:
    value = document.get(key)
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def readable_job(record: Record) -> Job | None:
    """``parse_job``, or ``None`` with a warning when the record cannot be read.

    Records carry what users wrote; one job whose fields make no sense is left out of
    the snapshot (Slurm still runs it as submitted), it never stops the tick for the
    other jobs."""
    try:
        return parse_job(record)
    except (ValueError, TypeError, KeyError, ArithmeticError) as exc:
        log.warning("job %s left out of this snapshot: its record cannot be read (%s)",
                    displayable(str(record.get("job_id", "?"))[:40]), displayable(str(exc))[:200])
        return None


def parse_jobs(document: Record) -> tuple[Job, ...]:
    """Every readable job of a ``squeue --json`` document (unreadable ones are skipped)."""
    return tuple(job for record in _records(document, "jobs") if (job := readable_job(record)) is not None)


def parse_nodes(document: Record) -> tuple[Node, ...]:
    return tuple(parse_node(record) for record in _records(document, "nodes"))


def errors(document: Record) -> list[str]:
    """The messages of a document's ``errors`` list (both schemas put them there)."""
    found: list[str] = []
    for item in document.get("errors") or []:
        if isinstance(item, Mapping):
            found.append(text(item.get("error") or item.get("description")) or str(dict(item)))
        else:
            found.append(str(item))
    return found
