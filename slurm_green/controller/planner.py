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
    gpus_changed = decision.gpus_per_node is not None and decision.gpus_per_node != job.gpus_per_node
    nodes_changed = decision.num_nodes is not None and decision.num_nodes != job.num_nodes
    if gpus_changed or nodes_changed:
        actions.append(
            SetGpus(
                job.job_id,
                decision.gpus_per_node if decision.gpus_per_node is not None else job.gpus_per_node,
                decision.num_nodes if nodes_changed else None,
            )
        )
    if decision.nodes is not None and tuple(decision.nodes) != job.nodes:
        actions.append(SetNodes(job.job_id, tuple(decision.nodes)))
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
