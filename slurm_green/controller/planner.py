"""From a policy's decisions to the backend actions that are not yet in force.

Planning is a diff against the snapshot, which is what makes a tick idempotent: a
controller killed after enacting half a plan finds those changes already in force
at its next tick and does not repeat them.
"""

from __future__ import annotations

from collections.abc import Callable

from slurm_green.core import decision_token, gpu_freq
from slurm_green.core.actions import Action, SetDecision, SetGpuFreq, SetGpus, SetNodes, SetStartTime
from slurm_green.core.gpu_freq import Enactment
from slurm_green.core.cluster import ClusterSnapshot, Job
from slurm_green.core.plan import JobDecision, Plan

#: A start time closer than this to the one already set is left alone (no churn).
START_TOLERANCE_S = 60.0

Signer = Callable[[int, dict[str, object]], str]


def decision_payload(decision: JobDecision, enact: Enactment = "power_cap") -> dict[str, object]:
    """What the compute node's Prolog needs to know, and nothing more."""
    payload: dict[str, object] = {}
    if decision.power_cap_fraction is not None and enact == "power_cap":
        payload["cap"] = round(decision.power_cap_fraction, 3)
    if decision.share_with is not None:
        payload["share"] = decision.share_with
    return payload


def _current_payload(job: Job, verify: Callable[[int, str], dict[str, object]] | None) -> dict[str, object] | None:
    token = decision_token.find_token(job.comment)
    if token is None or verify is None:
        return None
    try:
        return verify(job.job_id, token)
    except decision_token.InvalidToken:
        return None


def _start_actions(job: Job, decision: JobDecision, now: float) -> list[Action]:
    wanted = now if decision.start_at is None else max(decision.start_at, now)
    current = job.eligible_time
    if current is not None and current <= now and wanted <= now + START_TOLERANCE_S:
        return []  # already eligible and should be
    if current is not None and abs(current - wanted) < START_TOLERANCE_S:
        return []
    return [SetStartTime(job.job_id, wanted)]


def _size_actions(job: Job, decision: JobDecision) -> list[Action]:
    """GPUs per node, node count and node list, as far as they differ from the job's.

    A pinned node list always travels with its node count: Slurm (22.05 to 26.05) accepts
    ``ReqNodeList=node1,node2`` on a pending job whose ``NumNodes`` is 1 and keeps both,
    a job that can then never start as decided. Slurm applies the fields of one update
    whatever their order on the command line, so the two go as two actions that the
    backend merges into one ``scontrol update`` (``slurm.commands``). The snapshot's
    ``nodes`` of a pending job is its pin (``ReqNodeList``); an empty decided list clears it.
    """
    nodes = tuple(decision.nodes) if decision.nodes is not None else None
    count = len(nodes) if nodes else decision.num_nodes
    gpus_changed = decision.gpus_per_node is not None and decision.gpus_per_node != job.gpus_per_node
    count_changed = count is not None and count != job.num_nodes
    actions: list[Action] = []
    if gpus_changed or count_changed:
        per_node = decision.gpus_per_node if decision.gpus_per_node is not None else job.gpus_per_node
        actions.append(SetGpus(job.job_id, per_node, count if count_changed else None))
    if nodes is not None and sorted(nodes) != sorted(job.nodes):  # Slurm keeps a pin as a set
        actions.append(SetNodes(job.job_id, nodes))
    return actions


def job_actions(
    job: Job,
    decision: JobDecision,
    now: float,
    sign: Signer | None,
    verify: Callable[[int, str], dict[str, object]] | None,
    enact: Enactment = "power_cap",
) -> list[Action]:
    """Actions for one pending job, ordered so that a job never starts before its
    decision token, GPU clocks and final GPU count are in place: the start comes last."""
    actions: list[Action] = []
    payload = decision_payload(decision, enact)
    if sign is not None and payload and payload != _current_payload(job, verify):
        actions.append(SetDecision(job.job_id, sign(job.job_id, payload)))
    if enact == "gpu_freq" and decision.power_cap_fraction is not None:
        wanted = gpu_freq.tres_freq(decision.power_cap_fraction)
        if gpu_freq.level_of(job.tres_freq) != gpu_freq.level_of(wanted):
            actions.append(SetGpuFreq(job.job_id, wanted))
    actions.extend(_size_actions(job, decision))
    actions.extend(_start_actions(job, decision, now))
    return actions


def plan_actions(
    snapshot: ClusterSnapshot,
    plan: Plan,
    now: float,
    sign: Signer | None = None,
    verify: Callable[[int, str], dict[str, object]] | None = None,
    enact: Enactment = "power_cap",
) -> list[Action]:
    """All actions the plan needs; decisions for jobs no longer pending are dropped."""
    actions: list[Action] = []
    for decision in plan.decisions:
        job = snapshot.job(decision.job_id)
        if job is None or not job.is_pending:
            continue
        actions.extend(job_actions(job, decision, now, sign, verify, enact))
    return actions
