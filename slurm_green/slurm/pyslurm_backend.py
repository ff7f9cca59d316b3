"""The Slurm backend over pyslurm (Slurm's C API from Python), written for pyslurm 25.11.

UNTESTED AGAINST A REAL SLURM. pyslurm's major.minor must equal the cluster's
Slurm; PyPI offers pyslurm 25.11.x (and 17.x/18.x) only, and the Slurm versions we
run (Debian's 22.05, 24.11, 26.05) match none of them. This module is therefore
exercised only against a fake module shaped after pyslurm 25.11's documented API:

- ``pyslurm.Jobs.load()`` -> mapping whose ``values()`` are ``Job`` objects with
  ``id, name, user_name, account, partition, state, state_reason, submit_time,
  eligible_time, start_time, end_time, time_limit`` (minutes), ``num_nodes,
  allocated_nodes, priority, nice, comment, admin_comment, reservation, deadline, cpus_per_gpu,
  memory_per_gpu`` (MiB), ``gres_per_node``
  (a dict such as ``{"gpu:a100": 2}``);
- ``pyslurm.Nodes.load()`` -> list of ``Node`` with ``name, state`` (``"IDLE+DRAIN"``),
  ``reason, configured_gres, allocated_gres`` (dicts; with indices
  ``{"gpu:a100": {"count": 2, "indexes": "0-1"}}``), ``available_features, partitions``;
- ``pyslurm.Partitions.load()`` -> mapping of ``Partition`` (``name, nodes, state,
  is_default, max_time, default_time`` in minutes, ``max_nodes``);
- ``pyslurm.Reservations.load()`` -> mapping of ``Reservation`` (``name, start_time,
  end_time`` as epoch seconds, ``nodes`` a hostlist), read with the partitions;
- ``pyslurm.Job(id).modify(pyslurm.JobSubmitDescription(...))`` with ``begin_time``
  (epoch digits are taken as-is: no time-zone question), ``gres_per_node``, ``nodes``
  (the node count), ``required_nodes`` (``-w``), ``comment``, ``nice``, ``time_limit`` (minutes); ``Job(id).hold()`` /
  ``.release()``; failures raise ``pyslurm.RPCError`` whose text is ``slurm_strerror()``'s, classified like scontrol's.

The objects are turned into the same records the JSON parser reads, so normalisation
lives in one place (``schema``). Dry-run records the scontrol commands that the CLI
backend would run for the same actions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from slurm_green.core.actions import (
    Action,
    ActionError,
    ActionResult,
    Hold,
    Release,
    RequeueHold,
    SetDecision,
    SetGpuFreq,
    SetGpus,
    SetNice,
    SetNodes,
    SetTimeLimit,
    SetStartTime,
    ShareGpus,
    SignalJob,
)
from slurm_green.core.clock import Clock, SystemClock
from slurm_green.core.cluster import ClusterSnapshot, Job, Partition, Reservation
from slurm_green.core.decision_token import replace_token
from slurm_green.slurm import commands, hostlist, schema
from slurm_green.slurm.errors import SlurmError, classify

log = logging.getLogger(__name__)


def gres_text(value: Any) -> str:
    """pyslurm's GRES dict back to Slurm's string form, for ``schema`` to read."""
    if isinstance(value, str):
        return value
    if not isinstance(value, Mapping):
        return ""
    parts: list[str] = []
    for name, amount in value.items():
        if isinstance(amount, Mapping):
            indexes = amount.get("indexes")
            suffix = f"(IDX:{indexes})" if indexes not in (None, "") else ""
            parts.append(f"{name}:{amount.get('count', 0)}{suffix}")
        else:
            parts.append(f"{name}:{amount}")
    return ",".join(parts)


def _values(collection: Any) -> list[Any]:
    """Items of a pyslurm collection: ``Jobs`` is a mapping, ``Nodes`` a list."""
    return list(collection.values()) if hasattr(collection, "values") else list(collection)


def job_record(job: Any) -> dict[str, Any]:
    priority = getattr(job, "priority", None)
    return {
        "job_id": job.id,
        "name": getattr(job, "name", None),
        "user_name": getattr(job, "user_name", None),
        "account": getattr(job, "account", None),
        "partition": getattr(job, "partition", None),
        "job_state": getattr(job, "state", None),
        "state_reason": getattr(job, "state_reason", None),
        "submit_time": getattr(job, "submit_time", None),
        "eligible_time": getattr(job, "eligible_time", None),
        "start_time": getattr(job, "start_time", None),
        "end_time": getattr(job, "end_time", None),
        "time_limit": getattr(job, "time_limit", None),
        "node_count": getattr(job, "num_nodes", None),
        "cpus": getattr(job, "cpus", None),
        # pyslurm's ``memory`` is the job's total in MiB (per CPU or per node times the count),
        # what the schema reads from the ``mem`` of squeue's TRES
        "tres_req_str": f"mem={memory}M" if isinstance(memory := getattr(job, "memory", None), int) else None,
        "tres_per_node": gres_text(getattr(job, "gres_per_node", None)),
        "nodes": getattr(job, "allocated_nodes", None),
        "required_nodes": getattr(job, "required_nodes", None),
        "priority": priority,
        "nice": getattr(job, "nice", None),
        "hold": priority == 0,
        "comment": getattr(job, "comment", None),
        "admin_comment": getattr(job, "admin_comment", None),
        "resv_name": getattr(job, "reservation", None),
        "deadline": getattr(job, "deadline", None),
        # per GPU, as squeue's ``cpus_per_tres``/``memory_per_tres`` (MiB) say it
        "cpus_per_tres": f"gres/gpu:{n}" if isinstance(n := getattr(job, "cpus_per_gpu", None), int) else None,
        "memory_per_tres": f"gres/gpu:{m}" if isinstance(m := getattr(job, "memory_per_gpu", None), int) else None,
    }


def node_record(node: Any) -> dict[str, Any]:
    return {
        "name": node.name,
        "state": getattr(node, "state", None),
        "reason": getattr(node, "reason", None),
        "gres": gres_text(getattr(node, "configured_gres", None)),
        "gres_used": gres_text(getattr(node, "allocated_gres", None)),
        "features": getattr(node, "available_features", None),
        "partitions": getattr(node, "partitions", None),
        "cpus": getattr(node, "total_cpus", None),
        # ``alloc_cpus`` in pyslurm 23.02 on, ``allocated_cpus`` before
        "alloc_cpus": getattr(node, "alloc_cpus", getattr(node, "allocated_cpus", None)),
        "real_memory": getattr(node, "real_memory", None),
        "alloc_memory": getattr(node, "allocated_memory", None),
        "specialized_memory": getattr(node, "memory_reserved_for_system", None),
    }


def partition(record: Any) -> Partition:
    max_minutes = schema.number(getattr(record, "max_time", None))
    default_minutes = schema.number(getattr(record, "default_time", None))
    max_nodes = schema.number(getattr(record, "max_nodes", None))
    return Partition(
        name=record.name,
        nodes=hostlist.expand(schema.text(getattr(record, "nodes", None))),
        state=(schema.text(getattr(record, "state", None)) or "UP").upper(),
        default=bool(getattr(record, "is_default", False)),
        max_time_s=max_minutes * 60.0 if max_minutes else None,
        default_time_s=default_minutes * 60.0 if default_minutes else None,
        max_nodes=int(max_nodes) if max_nodes and max_nodes > 0 else None,
    )


def reservation(record: Any) -> Reservation | None:
    """A ``pyslurm.Reservation`` (``start_time``/``end_time`` as epoch seconds, ``nodes`` a
    hostlist); None where its times cannot be read."""
    start, end = schema.number(getattr(record, "start_time", None)), schema.number(getattr(record, "end_time", None))
    if start is None or end is None:
        return None
    return Reservation(name=schema.text(record.name), start=float(start), end=float(end),
                       nodes=hostlist.expand(schema.text(getattr(record, "nodes", None))))


class PyslurmBackend:
    """``ClusterBackend`` over pyslurm; see the module docstring for what is verified."""

    def __init__(
        self,
        module: ModuleType | Any,
        *,
        clock: Clock | None = None,
        dry_run: bool = False,
        partition_ttl_s: float = 300.0,
    ) -> None:
        self.pyslurm = module
        self.clock = clock or SystemClock()
        self.dry_run = dry_run
        self.partition_ttl_s = partition_ttl_s
        self.recorded: list[tuple[str, ...]] = []
        self._partitions: tuple[Partition, ...] = ()
        self._reservations: tuple[Reservation, ...] = ()
        self._partitions_at: float | None = None
        self._last: ClusterSnapshot | None = None

    def _load(self, what: str) -> list[Any]:
        try:
            return _values(getattr(self.pyslurm, what).load())
        except Exception as exc:  # pyslurm raises RPCError; anything else is as fatal here
            raise SlurmError(classify(str(exc)), f"pyslurm.{what}.load() failed: {exc}") from exc

    def snapshot(self) -> ClusterSnapshot:
        taken_at = self.clock.now()
        jobs = tuple(schema.parse_job(job_record(job)) for job in self._load("Jobs"))
        nodes = tuple(schema.parse_node(node_record(node)) for node in self._load("Nodes"))
        if self._partitions_at is None or taken_at - self._partitions_at >= self.partition_ttl_s:
            self._partitions = tuple(partition(record) for record in self._load("Partitions"))
            self._reservations = tuple(r for record in self._load("Reservations") if (r := reservation(record)))
            self._partitions_at = taken_at
        version = getattr(self.pyslurm, "version", lambda: "")()
        self._last = ClusterSnapshot(taken_at, str(version), jobs, nodes, self._partitions,
                                     tuple(r for r in self._reservations if r.end > taken_at))
        return self._last

    def _job(self, job_id: int) -> Job | None:
        return self._last.job(job_id) if self._last else None

    def _change(self, action: Action, now: float) -> dict[str, Any]:
        job = self._job(action.job_id)
        if isinstance(action, SetStartTime):
            return {"begin_time": str(int(max(action.start, now)))}
        if isinstance(action, SetGpus):
            gres = commands.job_gres(job, commands.gres_gpu(action.gpus_per_node, job.gpu_type if job else None))
            changes: dict[str, Any] = {"gres_per_node": gres}
            if action.num_nodes is not None:
                changes["nodes"] = action.num_nodes
            return changes
        if isinstance(action, SetNodes):  # sbatch -w; "" clears an earlier pin, as ReqNodeList= does
            return {"required_nodes": commands.req_node_list(action.nodes)}
        if isinstance(action, SetTimeLimit):  # sbatch --time: minutes, as a time string
            return {"time_limit": str(commands.time_limit_minutes(action.seconds))}
        if isinstance(action, SetDecision):
            return {"comment": replace_token(job.comment if job else "", action.token)}
        if isinstance(action, SetNice):
            return {"nice": action.nice}
        if isinstance(action, ShareGpus):
            return {"gres_per_node": commands.job_gres(job, self._share_gres(action))}
        raise TypeError(f"unknown action {action!r}")

    def _share_gres(self, action: ShareGpus) -> str:
        """As the CLI backend: shards of one GPU beside the partner (``commands.share_gres``).
        The node pin travels as its own ``SetNodes``, which the planner sends with it."""
        job, partner = self._job(action.job_id), self._job(action.with_job)
        names = (job.nodes if job else ()) or (partner.nodes if partner else ())
        nodes = self._last.nodes if self._last else ()
        node = next((n for n in nodes if (n.name == names[0] if names else n.shards_total)), None)
        return commands.share_gres(partner, node)

    def _refused(self, action: Action) -> ActionResult | None:
        """A ``ShareGpus`` Slurm cannot enact, or a GPU change of a job whose GRES request cannot
        be rewritten safely (``commands.unsafe_gres``), answered INVALID before anything is sent."""
        if isinstance(action, (SetGpus, ShareGpus)) and (why := commands.unsafe_gres(self._job(action.job_id))):
            return ActionResult(action, ActionError.INVALID, why)
        if not isinstance(action, ShareGpus):
            return None
        try:
            self._share_gres(action)
        except commands.ShareRefused as exc:
            return ActionResult(action, ActionError.INVALID, f"cannot share a GPU: {exc}")
        return None

    def _answered(self, action: Action) -> ActionResult | None:
        """The answer to an action refused before anything is sent (None: it is sent)."""
        if isinstance(action, SetGpuFreq):  # no documented JobSubmitDescription field to check it against
            return ActionResult(action, ActionError.INVALID, "TresFreq is not supported by the pyslurm backend; "
                                "use [slurm] backend = \"cli\" with gpu.enact = \"gpu_freq\"")
        if isinstance(action, (SignalJob, RequeueHold)):  # the API's spelling of both differs between releases
            return ActionResult(action, ActionError.INVALID, f"{type(action).__name__} (elastic requeue) is not "
                                "supported by the pyslurm backend; use [slurm] backend = \"cli\"")
        if isinstance(action, SetDecision) and self._job(action.job_id) is None:
            return ActionResult(action, ActionError.JOB_GONE, "job not in the last snapshot; comment unknown")
        return self._refused(action)

    def _call(self, job_id: int, call: Callable[[Any], object]) -> tuple[ActionError, str] | None:
        """One RPC on job ``job_id``: None if it took, else why not."""
        try:
            call(self.pyslurm.Job(job_id))
        except Exception as exc:  # RPCError carries slurm_strerror() text
            return classify(str(exc)), str(exc)
        return None

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        """As the CLI backend, from the same plan (``commands.plan``): one job's run of update fields
        is one ``modify`` (a decision takes whole or not at all), holds and releases one call each,
        and once Slurm is unreachable the rest are not tried. Dry-run records the scontrol commands
        the CLI backend would run."""
        now = self.clock.now()
        results = {index: answer for index, action in enumerate(actions) if (answer := self._answered(action))}
        sent = commands.without_refused_jobs([(i, a) for i, a in enumerate(actions) if i not in results], results)
        # One call per job here; the CLI backend's (recorded in dry-run) batches jobs given the same fields.
        planned = commands.plan(sent, self._job, now, batch_jobs=self.dry_run, share=self._share_gres)
        if self.dry_run:
            self.recorded.extend(command.argv for command in planned)
            return [results.get(index) or ActionResult(action, None, "dry-run") for index, action in enumerate(actions)]
        unreachable: tuple[ActionError, str] | None = None
        for command in planned:
            job_id, first = command.job_ids[0], actions[command.actions[0]]
            failed: tuple[ActionError, str] | None
            if unreachable is not None:
                failed = unreachable
            elif isinstance(first, Hold):
                failed = self._call(job_id, lambda job: job.hold())
            elif isinstance(first, Release):
                failed = self._call(job_id, lambda job: job.release())
            else:
                changes: dict[str, Any] = {}
                for index in command.actions:
                    changes.update(self._change(actions[index], now))
                failed = self._call(job_id, lambda job: job.modify(self.pyslurm.JobSubmitDescription(**changes)))
            for index in command.actions:
                results[index] = ActionResult(actions[index], *(failed or (None, "pyslurm")))
            if failed is not None and failed[0] is ActionError.UNREACHABLE:
                unreachable = failed
        return [results[index] for index in range(len(actions))]
