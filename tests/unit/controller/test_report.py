from slurm_green.controller.report import job_rows, totals
from slurm_green.controller.store import StateStore
from slurm_green.core.cluster import Job, JobState
from slurm_green.core.plan import JobDecision

NOW = 1_700_000_000.0


def test_report_joins_first_and_last_decision_with_the_actual_start(tmp_path):
    store = StateStore(tmp_path / "s.db")
    first = JobDecision(1, start_at=NOW + 7200, power_cap_fraction=0.7, reason="deferred",
                        expected_carbon_kg=0.5, carbon_if_now_kg=2.0)
    later = JobDecision(1, start_at=NOW + 3600, power_cap_fraction=0.7, reason="moved earlier",
                        expected_carbon_kg=0.4, carbon_if_now_kg=1.5)
    store.record_decisions(NOW, [first])
    store.observe_jobs(NOW, [Job(1, user="alice", submit_time=NOW - 60)])
    store.record_decisions(NOW + 300, [later])
    store.observe_jobs(NOW + 4000, [Job(1, user="alice", submit_time=NOW - 60, state=JobState.RUNNING,
                                        start_time=NOW + 3610)])
    (row,) = job_rows(store)
    assert row["actual_start"] == NOW + 3610 and row["decided_start"] == NOW + 3600
    assert row["carbon_if_now_kg"] == 2.0 and row["expected_carbon_kg"] == 0.4
    assert row["state"] == "RUNNING" and row["user"] == "alice"
    assert row["metered_energy_kwh"] is None
    assert store.record_metered_run(1, [(None, 0.25)])[1] == "" and job_rows(store)[0]["metered_energy_kwh"] == 0.25
    summary = totals([row])
    assert summary["saved_kg"] == 1.6 and summary["saved_fraction"] == 0.8


def test_pending_job_has_no_actual_start(tmp_path):
    store = StateStore(tmp_path / "s.db")
    store.observe_jobs(NOW, [Job(2, start_time=NOW + 999)])  # Slurm's expected start of a pending job
    assert store.jobs()[0]["start_time"] is None


def test_energy_saved_is_against_the_job_as_asked(tmp_path):
    store = StateStore(tmp_path / "s.db")
    store.record_decisions(NOW, [JobDecision(3, start_at=NOW, power_cap_fraction=0.7, reason="capped",
                                             expected_energy_kwh=7.5, energy_as_asked_kwh=10.0)])
    store.record_decisions(NOW, [JobDecision(4, start_at=NOW, reason="no model", expected_energy_kwh=2.0)])
    rows = job_rows(store)
    assert [r["energy_as_asked_kwh"] for r in rows] == [10.0, None]
    assert totals(rows)["saved_kwh"] == 2.5  # a job without the figure adds nothing
