from slurm_green.controller.store import StateStore
from slurm_green.core.actions import ActionError, ActionResult, SetStartTime
from slurm_green.core.plan import JobDecision

NOW = 1_700_000_000.0


def test_same_decision_recorded_once_across_ticks_and_restarts(tmp_path):
    path = tmp_path / "state.db"
    decision = JobDecision(1, start_at=NOW + 3600, power_cap_fraction=0.7, reason="deferred")
    store = StateStore(path)
    assert store.record_decisions(NOW, [decision]) == 1
    # the same choice re-derived a tick later, by a restarted controller, with a start a few seconds off
    store.close()
    store = StateStore(path)
    again = JobDecision(1, start_at=NOW + 3610, power_cap_fraction=0.7, reason="deferred again")
    assert store.record_decisions(NOW + 300, [again]) == 0
    changed = JobDecision(1, start_at=NOW + 7200, power_cap_fraction=0.7, reason="moved")
    assert store.record_decisions(NOW + 600, [changed]) == 1
    assert [d["reason"] for d in store.decisions(1)] == ["deferred", "moved"]
    assert store.latest_decisions()[1]["start_at"] == NOW + 7200


def test_action_outcomes_are_kept(tmp_path):
    store = StateStore(tmp_path / "s.db")
    results = [ActionResult(SetStartTime(4, NOW)), ActionResult(SetStartTime(5, NOW), ActionError.NOT_PENDING, "running")]
    store.record_tick(NOW, "window", None, ["note"], 2, 0, results)
    rows = store.actions()
    assert [(r["job_id"], r["ok"], r["error"]) for r in rows] == [(4, 1, None), (5, 0, "not_pending")]
    assert store.ticks()[0]["failures"] == 1
