"""Actions on pending jobs turned into as few ``scontrol`` commands as possible.

Pure: no I/O. The CLI backend runs the commands this module plans, and dry-run mode
records them. Batching follows what scontrol allows:

- all field changes of one job go into one ``scontrol update JobId=N F1=.. F2=..``;
- jobs that receive identical fields share one call, ``JobId=1,2,3`` (scontrol
  accepts a job list and slurmctld applies the update to each job);
- consecutive holds (releases) share one ``scontrol hold 1,2,3``;
- a signal (``scancel --signal=USR2 N``) and a requeue (``scontrol requeuehold N``) go one
  job per command: each is a step of one job's resize, whose outcome is the job's own.

A call shared by several jobs that fails cannot say which job failed, so it carries one
call per job as its fallback, which the executor runs only then. One job's fields are never
split into calls of their own: a decision takes whole or not at all. (A job that started
between the snapshot and the update makes Slurm refuse the update, with "no longer pending",
or for a node list "Invalid node name specified"; retried field by field, the Comment and
TimeLimit that Slurm still allows on a running job took, and the job ran with one decision's
GPUs and nodes under another's token and time limit: seen in the GreenFlow kill campaign.)

StartTime: ``scontrol`` parses ``YYYY-MM-DDTHH:MM:SS`` in the local time zone *of the
scontrol process*, which is not necessarily ours (think ``docker exec`` or a
controller host with another TZ, or a DST switch making a local hour ambiguous). We
therefore format the instant in UTC and run scontrol with ``TZ=UTC0``
(``SCONTROL_ENV``): exact to the second, DST-free, whatever the hosts' zones. A time
not after ``now`` becomes ``now``. (``now+Ns`` would also be zone-free but is
measured from when scontrol runs, so queueing and latency would shift it.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from slurm_green.core.actions import (Action, ActionError, ActionResult, Hold, Release, RequeueHold, SetDecision,
                                      SetGpuFreq, SetGpus, SetNice, SetNodes, SetStartTime, SetTimeLimit, ShareGpus,
                                      SignalJob)
from slurm_green.core.cluster import Job, Node
from slurm_green.core.decision_token import replace_token
from slurm_green.slurm import gres

SCONTROL_ENV = {"TZ": "UTC0"}


@dataclass(frozen=True, slots=True)
class Command:
    """One scontrol invocation and the indices of the actions it carries out."""

    argv: tuple[str, ...]
    actions: tuple[int, ...]
    job_ids: tuple[int, ...]
    fallback: tuple["Command", ...] = field(default=())


def format_start_time(start: float, now: float) -> str:
    """Slurm ``StartTime`` value for POSIX ``start``, to be parsed under ``TZ=UTC0``."""
    if start <= now:
        return "now"
    return datetime.fromtimestamp(math.ceil(start), tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def gres_gpu(count: int, gpu_type: str | None) -> str:
    """``Gres`` value; a job's GPU type is kept so a change never widens its request.

    ``Gres=gpu:N``, not ``TresPerNode=gres/gpu:N``: scontrol turns ``Gres`` into its own
    version's ``TresPerNode`` spelling. Slurm 22.05 spells it ``gres:gpu:N``, and given
    ``TresPerNode=gres/gpu:N`` it answers success, shows the new count and still allocates
    the old one (seen on the Docker cluster: asked 3, ran on 1 GPU); 24.11 and 26.05 take all
    three spellings.
    """
    return f"gpu:{gpu_type}:{count}" if gpu_type else f"gpu:{count}"


#: The entries of a job's request that ``SetGpus`` and ``ShareGpus`` rewrite; all others are kept.
GPU_GRES = frozenset({"gpu", "shard"})


def job_gres(job: Job | None, gpu_gres: str) -> str:
    """``Gres`` of ``job`` with ``gpu_gres`` (``gres_gpu`` or ``share_gres``) in place of its
    ``gpu`` and ``shard`` entries, every other entry of its request kept.

    ``scontrol update Gres=`` replaces the job's whole per-node request (its
    ``tres_per_node``), it does not merge: ``Gres=gpu:2`` on a job submitted with
    ``--gres=gpu:4,nvme:1`` drops ``nvme:1``, and the job may then start on a node without
    it. So the other entries (``nvme:1``, ``nic:2``, any site GRES) go back in, in scontrol's
    spelling (``gpu:2,nvme:1``; scontrol adds its version's ``gres/`` or ``gres:``).
    Raises ``gres.UnsafeGres`` for a request that cannot be read entry by entry: the backends
    check ``unsafe_gres`` first and leave such a job's GRES alone. A job not known (``None``)
    gets ``gpu_gres`` alone, as nothing else is known of its request.
    """
    kept = [entry for entry in gres.request_entries(job.tres_per_node if job else "")
            if gres.request_name(entry) not in GPU_GRES]
    return ",".join((gpu_gres, *kept))


def unsafe_gres(job: Job | None) -> str | None:
    """Why ``job``'s GRES request cannot be rewritten (``job_gres``), or ``None`` when it can."""
    try:
        gres.request_entries(job.tres_per_node if job else "")
    except gres.UnsafeGres as exc:
        return f"job {job.job_id if job else '?'}: its GRES is left as it is: {exc}"
    return None


def req_node_list(nodes: Sequence[str]) -> str:
    """``ReqNodeList`` value: the nodes as a plain comma list (Slurm reads it back as a hostlist);
    none clears an earlier pin."""
    return ",".join(nodes)


class ShareRefused(ValueError):
    """A co-location Slurm cannot enact with shards (the message says why)."""


def share_gres(partner: Job | None, node: Node | None) -> str:
    """``Gres`` of a job that is to share one GPU with ``partner`` on ``node``: ``shard:K``.

    Slurm gives each job's shards of a node from one GPU, and never shards of a GPU that
    is allocated whole (seen on 22.05, 24.11 and 26.05), so a partner running on whole
    GPUs cannot be joined. ``K`` fills what the partner leaves of one GPU (half a GPU's
    shards beside a pending partner, which gets the other half): the pair then holds the
    whole GPU and no third shard job lands on it.
    """
    if partner is None:
        raise ShareRefused("the partner job is gone")
    if not partner.is_pending and partner.gpus_per_node:
        raise ShareRefused(f"job {partner.job_id} runs on whole GPUs: shards cannot join a GPU allocated whole")
    if node is None or not node.shards_total or not node.gpus_total:
        raise ShareRefused(f"node {node.name if node else '?'} has no gres/shard (GresTypes=gpu,shard, gres.conf)")
    per_gpu = node.shards_total // node.gpus_total
    count = per_gpu - partner.shards_per_node if not partner.is_pending and partner.shards_per_node else per_gpu // 2
    if count < 1:
        raise ShareRefused(f"job {partner.job_id} holds all {per_gpu} shards of its GPU")
    return f"shard:{count}"


def _fields(action: Action, job: Job | None, now: float, comment: str,
            share: Callable[[ShareGpus], str] | None = None) -> dict[str, str]:
    if isinstance(action, SetStartTime):
        return {"StartTime": format_start_time(action.start, now)}
    if isinstance(action, SetGpus):
        fields = {"Gres": job_gres(job, gres_gpu(action.gpus_per_node, job.gpu_type if job else None))}
        if action.num_nodes is not None:
            fields["NumNodes"] = str(action.num_nodes)
        return fields
    if isinstance(action, SetNodes):
        return {"ReqNodeList": req_node_list(action.nodes)}
    if isinstance(action, SetTimeLimit):
        return {"TimeLimit": str(time_limit_minutes(action.seconds))}
    if isinstance(action, SetDecision):
        return {"Comment": replace_token(comment, action.token)}
    if isinstance(action, SetGpuFreq):
        return {"TresFreq": action.tres_freq}
    if isinstance(action, SetNice):
        return {"Nice": str(action.nice)}
    if isinstance(action, ShareGpus) and share is not None:
        return {"Gres": job_gres(job, share(action))}
    raise TypeError(f"not an update action: {action!r}")


def time_limit_minutes(seconds: float) -> int:
    """Slurm's TimeLimit in whole minutes, rounded up (its resolution; at least one)."""
    return max(1, math.ceil(seconds / 60.0))


def update_argv(job_ids: Sequence[int], fields: dict[str, str]) -> tuple[str, ...]:
    ids = ",".join(str(job_id) for job_id in job_ids)
    return ("scontrol", "update", f"JobId={ids}", *(f"{key}={value}" for key, value in fields.items()))


def _plan_updates(
    indexed: list[tuple[int, Action]], job_info: Callable[[int], Job | None], now: float, batch_jobs: bool,
    share: Callable[[ShareGpus], str] | None,
) -> list[Command]:
    per_job: dict[int, list[tuple[int, dict[str, str]]]] = {}
    comments: dict[int, str] = {}
    for index, action in indexed:
        job = job_info(action.job_id)
        comment = comments.get(action.job_id, job.comment if job else "")
        fields = _fields(action, job, now, comment, share)
        if "Comment" in fields:
            comments[action.job_id] = fields["Comment"]
        per_job.setdefault(action.job_id, []).append((index, fields))

    job_commands: dict[tuple[tuple[str, str], ...], list[Command]] = {}
    for job_id, items in per_job.items():
        merged: dict[str, str] = {}
        for _, fields in items:
            merged.update(fields)
        command = Command(update_argv([job_id], merged), tuple(index for index, _ in items), (job_id,))
        key = tuple(merged.items()) if batch_jobs else (("JobId", str(job_id)),)
        job_commands.setdefault(key, []).append(command)

    planned: list[Command] = []
    for key, commands in job_commands.items():
        if len(commands) == 1:
            planned.append(commands[0])
            continue
        job_ids = tuple(job_id for command in commands for job_id in command.job_ids)
        planned.append(
            Command(
                update_argv(job_ids, dict(key)),
                tuple(index for command in commands for index in command.actions),
                job_ids,
                tuple(commands),
            )
        )
    return planned


def _plan_hold(verb: str, indexed: list[tuple[int, Action]], batch_jobs: bool) -> list[Command]:
    singles = [Command(("scontrol", verb, str(a.job_id)), (i,), (a.job_id,)) for i, a in indexed]
    if not batch_jobs or len(singles) == 1:
        return singles
    job_ids = tuple(dict.fromkeys(a.job_id for _, a in indexed))
    argv = ("scontrol", verb, ",".join(str(job_id) for job_id in job_ids))
    return [Command(argv, tuple(i for i, _ in indexed), job_ids, tuple(singles))]


def signal_argv(action: SignalJob) -> tuple[str, ...]:
    """``scancel --signal``: to the job's steps (``srun``), as ``sbatch --signal=USR2`` does;
    ``--batch``: to the batch script's shell only (a script that ``exec``s its trainer). Never
    ``--full``: a shell that traps nothing dies of SIGUSR2, and the job with it."""
    return ("scancel", f"--signal={action.signal}", *(("--batch",) if action.batch else ()), str(action.job_id))


def _plan_single(indexed: list[tuple[int, Action]]) -> list[Command]:
    commands = []
    for index, action in indexed:
        argv = signal_argv(action) if isinstance(action, SignalJob) else ("scontrol", "requeuehold", str(action.job_id))
        commands.append(Command(argv, (index,), (action.job_id,)))
    return commands


def _kind(action: Action) -> str:
    if isinstance(action, Hold):
        return "hold"
    if isinstance(action, Release):
        return "release"
    if isinstance(action, (SignalJob, RequeueHold)):
        return "single"
    return "update"


def without_refused_jobs(indexed: Sequence[tuple[int, Action]],
                         results: dict[int, ActionResult]) -> list[tuple[int, Action]]:
    """``indexed`` less the update fields of the jobs of which ``results`` refused an action before
    anything was sent; those are answered ``BLOCKED`` there: a decision takes whole or not at all."""
    refused = {result.action.job_id: result for result in results.values() if not result.ok}
    kept = []
    for index, action in indexed:
        first = refused.get(action.job_id)
        if first is None or _kind(action) != "update":
            kept.append((index, action))
            continue
        why = f"{type(first.action).__name__} of this job was refused ({first.message})"
        results[index] = ActionResult(action, ActionError.BLOCKED, f"not sent: {why}; a decision takes whole "
                                                                    "or not at all")
    return kept


def plan(
    actions: Sequence[tuple[int, Action]],
    job_info: Callable[[int], Job | None],
    now: float,
    batch_jobs: bool = True,
    share: Callable[[ShareGpus], str] | None = None,
) -> list[Command]:
    """Commands for ``(index, action)`` pairs, in an order that respects the actions' order.

    Runs of consecutive updates are merged; a hold or release ends a run, so
    "hold, then change, then release" keeps its meaning. ``job_info`` gives the last
    known state of a job (its comment, to keep the user's words, its GPU type and its other
    GRES, see ``job_gres``); ``share`` the shards of a ``ShareGpus`` (``share_gres``, the
    backend knows the nodes). A ``SetGpus`` or ``ShareGpus`` of a job whose ``unsafe_gres``
    is not ``None`` raises ``gres.UnsafeGres``: callers answer those first.
    """
    planned: list[Command] = []
    run: list[tuple[int, Action]] = []
    kind: str | None = None

    def flush() -> None:
        if not run:
            return
        if kind == "update":
            planned.extend(_plan_updates(run, job_info, now, batch_jobs, share))
        elif kind == "single":
            planned.extend(_plan_single(run))
        else:
            planned.extend(_plan_hold(kind or "hold", run, batch_jobs))
        run.clear()

    for index, action in actions:
        this = _kind(action)
        if this != kind:
            flush()
            kind = this
        run.append((index, action))
    flush()
    return planned
