"""A start is enacted only after the rest of its job's decision took (controller.enactment)."""

from __future__ import annotations

from collections.abc import Sequence

from slurm_green.controller.enactment import enact
from slurm_green.core.actions import (Action, ActionError, ActionResult, SetDecision, SetGpus, SetStartTime,
                                      SetTimeLimit, ShareGpus)
from slurm_green.core.cluster import ClusterSnapshot

NOW = 1_700_000_000.0


class RefusingBackend:
    """Refuses the actions of the jobs in ``refuse``; records every call it gets."""

    def __init__(self, refuse: set[int]) -> None:
        self.refuse = refuse
        self.calls: list[list[Action]] = []

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(taken_at=NOW)

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        self.calls.append(list(actions))
        return [ActionResult(a, ActionError.INVALID, "Comment too long") if a.job_id in self.refuse
                else ActionResult(a) for a in actions]


def test_starts_go_last_and_only_for_jobs_whose_decision_took() -> None:
    actions = [SetDecision(1, "t1"), SetStartTime(1, NOW), SetDecision(2, "t2"), SetGpus(2, 2), SetStartTime(2, NOW),
               SetStartTime(3, NOW)]
    backend = RefusingBackend(refuse={2})
    results = enact(backend, actions)
    assert backend.calls == [[SetDecision(1, "t1"), SetDecision(2, "t2"), SetGpus(2, 2)],
                             [SetStartTime(1, NOW), SetStartTime(3, NOW)]]
    assert [r.action for r in results] == actions
    assert [r.error for r in results] == [None, None, ActionError.INVALID, ActionError.INVALID, ActionError.BLOCKED,
                                          None]
    assert "SetDecision failed (invalid)" in results[4].message


def test_nothing_to_enact_calls_nothing() -> None:
    backend = RefusingBackend(refuse=set())
    assert enact(backend, []) == [] and backend.calls == []


def test_a_guest_waits_for_its_running_hosts_time_limit_raise() -> None:
    """Refused (a QOS MaxWall the planner cannot see), the host would run slowed by the sharing
    under its old limit and be killed at it: the guest does not start this tick."""
    actions = [SetTimeLimit(5, 7200.0), ShareGpus(13, 5), SetStartTime(13, NOW), SetStartTime(14, NOW)]
    results = enact(RefusingBackend(refuse={5}), actions)
    assert [r.error for r in results] == [ActionError.INVALID, None, ActionError.BLOCKED, None]
    assert "SetTimeLimit of partner job 5 failed (invalid)" in results[2].message
