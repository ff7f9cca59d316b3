"""The order in which a tick enacts its actions: a job starts only once everything
else decided for it is in force.

Slurm applies the fields of one ``scontrol update`` one by one, so an update carrying
both a refused field and ``StartTime=now`` still starts the job. That happened: a user
comment of 1,000 characters pushed the decision token past Slurm's 1,024-character
Comment limit, the token was refused, and the job started at once without the power
cap it was decided with. So the starts go to the backend in a second call, and only
for jobs whose every other action of this tick succeeded. A job whose decision did not
take keeps the fallback start job_submit.lua gave it (its deadline) and is tried again
next tick; its start is reported as ``ActionError.BLOCKED`` with the reason. A guest
joining a partner's GPUs (``ShareGpus``) waits for the partner's actions too: the raise of
a running host's time limit for the sharing that slows it (``planner``); started without
it, the host would be killed at its old limit.

Backend-agnostic: the Slurm backend and the simulator enact in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence

from slurm_green.core.actions import Action, ActionError, ActionResult, SetStartTime, ShareGpus
from slurm_green.core.backend import ClusterBackend


def enact(backend: ClusterBackend, actions: Sequence[Action]) -> list[ActionResult]:
    """Apply ``actions`` (one result each, in order): first all but the starts, then the
    starts of the jobs none of whose other actions, nor their sharing partner's, failed."""
    results: dict[int, ActionResult] = {}
    _apply(backend, [(i, a) for i, a in enumerate(actions) if not isinstance(a, SetStartTime)], results)
    first_failure: dict[int, ActionResult] = {}
    for result in results.values():
        if not result.ok:
            first_failure.setdefault(result.action.job_id, result)
    partner = {a.job_id: a.with_job for a in actions if isinstance(a, ShareGpus)}
    starts: list[tuple[int, Action]] = []
    for index, action in enumerate(actions):
        if not isinstance(action, SetStartTime):
            continue
        failed = first_failure.get(action.job_id) or first_failure.get(partner.get(action.job_id, action.job_id))
        if failed is None:
            starts.append((index, action))
        else:
            whose = "" if failed.action.job_id == action.job_id else f" of partner job {failed.action.job_id}"
            why = f"{type(failed.action).__name__}{whose} failed ({failed.error.value if failed.error else '?'})"
            results[index] = ActionResult(action, ActionError.BLOCKED, f"start not enacted: {why}")
    _apply(backend, starts, results)
    return [results[index] for index in range(len(actions))]


def _apply(backend: ClusterBackend, indexed: list[tuple[int, Action]], results: dict[int, ActionResult]) -> None:
    if not indexed:
        return
    for (index, _), result in zip(indexed, backend.apply([action for _, action in indexed]), strict=True):
        results[index] = result
