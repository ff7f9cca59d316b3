import sqlite3
import threading
import time

import pandas as pd
import pytest

from slurm_green.carbon.signal import CarbonSignal
from slurm_green.controller.store import USAGE_KEPT_BEYOND_RETENTION_S, StateStore
from slurm_green.core.cluster import Job, JobState
from slurm_green.core.actions import ActionError, ActionResult, SetStartTime
from slurm_green.core.plan import JobDecision
from slurm_green.core.progress import JobProgress, MeasuredRate

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


def test_the_same_choice_made_for_another_gpu_type_is_news_and_names_its_type(tmp_path):
    store = StateStore(tmp_path / "state.db")
    decision = JobDecision(1, start_at=NOW, power_cap_fraction=0.7, reason="now")
    assert store.record_decisions(NOW, [decision]) == 1
    assert store.record_decisions(NOW + 300, [JobDecision(1, start_at=NOW, power_cap_fraction=0.7,
                                                          gpu_type="h100")]) == 1
    assert [d["gpu_type"] for d in store.decisions(1)] == [None, "h100"]


def test_intents_are_stored_before_enacting_and_replaced_by_outcomes(tmp_path):
    store = StateStore(tmp_path / "s.db")
    actions = [SetStartTime(4, NOW), SetStartTime(5, NOW)]
    ids = store.record_intents(NOW, actions)
    # killed here: the audit trail shows both as intended, outcome unknown
    assert [(r["job_id"], r["ok"], r["error"]) for r in store.actions()] == [(4, 0, "unknown"), (5, 0, "unknown")]
    results = [ActionResult(actions[0]), ActionResult(actions[1], ActionError.NOT_PENDING, "running")]
    store.record_outcomes(ids, results)
    store.record_tick(NOW, "window", None, ["note"], 2, 0, results)
    rows = store.actions()
    assert [(r["job_id"], r["ok"], r["error"]) for r in rows] == [(4, 1, None), (5, 0, "not_pending")]
    assert store.ticks()[0]["failures"] == 1


def test_bytes_users_wrote_that_are_not_utf8_are_stored_visibly(tmp_path):
    store = StateStore(tmp_path / "s.db")
    name = b"caf\xe9".decode("utf-8", "surrogateescape")
    store.observe_jobs(NOW, [Job(1, name=name, user="alice")])
    action = SetStartTime(1, NOW)
    store.record_outcomes(store.record_intents(NOW, [action]), [ActionResult(action, ActionError.OTHER, name)])
    assert store.jobs()[0]["name"] == "caf\\xe9" and store.actions()[0]["message"] == "caf\\xe9"


def test_the_size_a_job_had_when_first_seen_pending_is_kept(tmp_path):
    """Later sizes (a decision's) leave it; a job first seen running (requeued later) gets the
    size it has when first seen pending."""
    store = StateStore(tmp_path / "s.db")
    store.observe_jobs(NOW, [Job(1, gpus_per_node=1), Job(2, state=JobState.RUNNING, gpus_per_node=2)])
    store.observe_jobs(NOW + 60, [Job(1, gpus_per_node=4, num_nodes=2), Job(2, gpus_per_node=2)])
    store.close()
    assert StateStore(tmp_path / "s.db").asked_sizes([1, 2, 3]) == {1: (1, 1), 2: (1, 2)}


def flat_signal(value: float) -> CarbonSignal:
    index = pd.date_range(pd.Timestamp(NOW - 86400, unit="s", tz="UTC"), periods=72, freq="h")
    return CarbonSignal.from_series(pd.Series(value, index=index))


def test_run_energy_and_carbon_are_accounted_over_the_time_the_job_ran(tmp_path):
    store = StateStore(tmp_path / "s.db")
    store.record_decisions(NOW - 60, [JobDecision(1, start_at=NOW, expected_energy_kwh=2.0, expected_runtime_s=7200)])
    running = Job(1, state=JobState.RUNNING, start_time=NOW)
    store.observe_jobs(NOW + 1800, [running])
    store.account_usage(NOW + 1800, [running], flat_signal(200.0))
    store.account_usage(NOW + 2400, [running], None)  # carbon-agnostic tick: energy only
    done = Job(1, state=JobState.COMPLETED, start_time=NOW, end_time=NOW + 3000)
    store.account_usage(NOW + 3600, [done], flat_signal(500.0))
    store.account_usage(NOW + 4000, [done], flat_signal(500.0))  # nothing after its end
    [row] = store.jobs()
    # 1 kW: 0.5 kWh at 200 g, 1/6 kWh without a signal, 1/6 kWh at 500 g (it ended at +3000 s)
    assert row["energy_kwh"] == pytest.approx(0.5 + 1 / 6 + 1 / 6)
    assert row["carbon_kg"] == pytest.approx(0.5 * 0.2 + 1 / 6 * 0.5)
    assert row["accounted_until"] == NOW + 3000


def test_jobs_without_a_decision_or_not_started_are_not_accounted(tmp_path):
    store = StateStore(tmp_path / "s.db")
    jobs = [Job(2, state=JobState.RUNNING, start_time=NOW), Job(3, start_time=NOW + 999)]
    store.observe_jobs(NOW, jobs)
    store.record_decisions(NOW, [JobDecision(3, start_at=NOW, expected_energy_kwh=1.0, expected_runtime_s=3600)])
    store.account_usage(NOW + 600, jobs, flat_signal(100.0))
    assert [(r["energy_kwh"], r["carbon_kg"]) for r in store.jobs()] == [(None, None), (None, None)]


def test_a_store_written_by_an_older_release_gains_the_new_columns(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, user TEXT, name TEXT, submit_time REAL,"
                   " start_time REAL, end_time REAL, state TEXT, last_seen REAL NOT NULL)")
        db.execute("INSERT INTO jobs VALUES (9, 'alice', 'x', 1, 2, NULL, 'RUNNING', 3)")
    store = StateStore(path)
    [row] = store.jobs()
    assert row["job_id"] == 9 and row["energy_kwh"] is None and "accounted_until" in row
    store.record_decisions(NOW, [JobDecision(9, start_at=NOW, gpu_type="a40")])
    assert store.decisions(9)[0]["gpu_type"] == "a40"


def test_what_a_decisions_model_assumed_is_stored_as_said_and_survives_a_restart(tmp_path):
    """"" (fitted) and None (not recorded) stay apart; a note quoting a job name with bytes that
    were not UTF-8 is stored with them escaped (SQLite refuses lone surrogates), newlines kept."""
    path = tmp_path / "state.db"
    store = StateStore(path)
    note = "job name 'run\udcff\nx' matches no modelled job type"
    assert store.record_decisions(NOW, [JobDecision(1, start_at=NOW, model_assumed=note),
                                        JobDecision(2, start_at=NOW, model_assumed=""),
                                        JobDecision(3, start_at=NOW)]) == 3
    store.close()
    store = StateStore(path)
    assert [d["model_assumed"] for d in store.decisions()] == [
        "job name 'run\\xff\nx' matches no modelled job type", "", None]


def test_a_store_of_the_release_before_model_assumed_gains_it_and_keeps_its_decisions(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # the decisions table as the previous release left it
        db.execute("CREATE TABLE decisions (id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL, decided_at REAL NOT NULL,"
                   " start_at REAL, gpus_per_node INTEGER, num_nodes INTEGER, nodes TEXT, cap_fraction REAL,"
                   " share_with INTEGER, reason TEXT NOT NULL, expected_energy_kwh REAL, expected_carbon_kg REAL,"
                   " carbon_if_now_kg REAL, expected_runtime_s REAL, model_params TEXT, energy_as_asked_kwh REAL,"
                   " gpu_type TEXT)")
        db.execute("INSERT INTO decisions (job_id, decided_at, start_at, reason, model_params, gpu_type)"
                   " VALUES (9, 1, 2, 'old', 'edffbd853434', 'a40')")
    store = StateStore(path)
    [old] = store.decisions(9)
    assert old["model_assumed"] is None and old["model_params"] == "edffbd853434"  # not recorded then
    store.record_decisions(NOW, [JobDecision(9, start_at=NOW, gpu_type="h200", model_assumed="GPU type h200: x")])
    assert [d["model_assumed"] for d in store.decisions(9)] == [None, "GPU type h200: x"]
    store.close()
    assert [d["model_assumed"] for d in StateStore(path).decisions(9)] == [None, "GPU type h200: x"]  # added once


def test_a_stretch_counted_past_the_jobs_end_is_taken_back(tmp_path):
    store = StateStore(tmp_path / "s.db")
    store.record_decisions(NOW - 60, [JobDecision(1, start_at=NOW, expected_energy_kwh=1.0, expected_runtime_s=3600)])
    # the tick at +1000 s still saw it running; Slurm then reports it ended at +900 s
    store.observe_jobs(NOW + 1000, [Job(1, state=JobState.RUNNING, start_time=NOW)])
    store.account_usage(NOW + 1000, [Job(1, state=JobState.RUNNING, start_time=NOW)], flat_signal(300.0))
    done = Job(1, state=JobState.COMPLETED, start_time=NOW, end_time=NOW + 900)
    store.account_usage(NOW + 1003, [done], flat_signal(300.0))
    [row] = store.jobs()
    assert row["energy_kwh"] == pytest.approx(0.25) and row["carbon_kg"] == pytest.approx(0.075)
    assert row["accounted_until"] == NOW + 900


def test_a_clock_stepped_back_does_not_take_back_energy_an_ended_job_really_drew(tmp_path):
    """Only a stretch counted past the job's end is taken back: a clock stepped back (NTP step,
    VM restore) below ``accounted_until`` while the ended job is still in squeue adds and
    takes nothing, so the job keeps what it drew if it leaves squeue before the clock catches up."""
    store = StateStore(tmp_path / "s.db")
    store.record_decisions(NOW - 60, [JobDecision(1, start_at=NOW, expected_energy_kwh=1.0, expected_runtime_s=3600)])
    done = Job(1, state=JobState.COMPLETED, start_time=NOW, end_time=NOW + 3600)
    store.observe_jobs(NOW + 3700, [done])
    store.account_usage(NOW + 3700, [done], flat_signal(200.0))
    assert store.jobs()[0]["energy_kwh"] == pytest.approx(1.0)
    store.account_usage(NOW + 1900, [done], flat_signal(200.0))  # the host clock stepped back 30 min
    [row] = store.jobs()
    assert row["energy_kwh"] == pytest.approx(1.0) and row["accounted_until"] == NOW + 3600
    assert store.spent(NOW - 3600, NOW + 7200).energy_kwh == pytest.approx(1.0)


def test_a_stretch_counted_past_the_end_is_taken_back_to_the_end_even_with_the_clock_behind_it(tmp_path):
    store = StateStore(tmp_path / "s.db")
    store.record_decisions(NOW - 60, [JobDecision(1, start_at=NOW, expected_energy_kwh=1.0, expected_runtime_s=3600)])
    running = Job(1, state=JobState.RUNNING, start_time=NOW)
    store.observe_jobs(NOW + 1800, [running])
    store.account_usage(NOW + 1800, [running], flat_signal(200.0))  # counted to +1800 s
    done = Job(1, state=JobState.COMPLETED, start_time=NOW, end_time=NOW + 900)
    store.account_usage(NOW + 600, [done], flat_signal(200.0))  # the clock stepped back below the end too
    [row] = store.jobs()
    assert row["energy_kwh"] == pytest.approx(0.25) and row["accounted_until"] == NOW + 900
    assert store.spent(NOW - 3600, NOW + 7200).energy_kwh == pytest.approx(0.25)


def test_prune_forgets_old_ended_and_vanished_jobs_and_keeps_live_ones(tmp_path):
    store = StateStore(tmp_path / "s.db")
    day = 86400.0
    old, vanished, live = (Job(1, state=JobState.COMPLETED, start_time=NOW - 99 * day, end_time=NOW - 98 * day),
                           Job(2, state=JobState.RUNNING, start_time=NOW - 97 * day), Job(3))
    store.record_decisions(NOW - 99 * day, [JobDecision(1, reason="a"), JobDecision(2, reason="b")])
    store.observe_jobs(NOW - 97 * day, [old, vanished])  # job 2 is not seen again: gone from Slurm
    store.record_tick(NOW - 97 * day, "window", None, [], 1, 2, [])
    store.record_decisions(NOW, [JobDecision(3, reason="c")])
    store.observe_jobs(NOW, [live])
    store.record_tick(NOW, "window", None, [], 1, 1, [])
    assert store.prune(NOW - 90 * day) == 2
    assert [row["job_id"] for row in store.jobs()] == [3] and list(store.latest_decisions()) == [3]
    assert [row["tick_at"] for row in store.ticks()] == [NOW]


def test_a_read_only_store_creates_nothing_and_writes_nothing(tmp_path):
    path = tmp_path / "state" / "s.db"
    with pytest.raises(FileNotFoundError, match="has not run"):
        StateStore(path, read_only=True)
    assert not path.parent.exists()  # no directory either
    StateStore(path).record_decisions(NOW, [JobDecision(1, reason="now")])
    reader = StateStore(path, read_only=True)
    assert [d["job_id"] for d in reader.decisions()] == [1]
    with pytest.raises(sqlite3.OperationalError):
        reader.record_decisions(NOW + 1, [JobDecision(2, reason="now")])


def hourly_signal(values: list[float]) -> CarbonSignal:
    """Hour h after NOW's hour has intensity values[h] (earlier hours the first value)."""
    hour = NOW // 3600 * 3600
    index = pd.date_range(pd.Timestamp(hour - 3600, unit="s", tz="UTC"), periods=len(values) + 1, freq="h")
    return CarbonSignal.from_series(pd.Series([values[0], *values], index=index))


def test_usage_is_kept_by_quarter_hour_so_any_period_sums_what_ran_in_it(tmp_path):
    store = StateStore(tmp_path / "s.db")
    hour = NOW // 3600 * 3600
    store.record_decisions(hour, [JobDecision(1, start_at=hour, expected_energy_kwh=2.0, expected_runtime_s=7200)])
    running = Job(1, state=JobState.RUNNING, start_time=hour + 600)  # 1 kW from 10 min past the hour
    signal = hourly_signal([100.0, 400.0, 400.0])
    store.observe_jobs(hour + 4500, [running])
    store.account_usage(hour + 4500, [running], signal)  # one stretch across the hour boundary
    first, second = store.spent(hour, hour + 3600), store.spent(hour + 3600, hour + 7200)
    assert first.energy_kwh == pytest.approx(50 / 60) and first.carbon_kg == pytest.approx(50 / 60 * 0.1)
    assert second.energy_kwh == pytest.approx(15 / 60) and second.carbon_kg == pytest.approx(15 / 60 * 0.4)
    assert store.spent(hour + 900, hour + 1800).energy_kwh == pytest.approx(0.25) and first.jobs == 1
    [row] = store.jobs()  # the job's own totals are the buckets' sums
    assert row["energy_kwh"] == pytest.approx(first.energy_kwh + second.energy_kwh)
    assert row["carbon_kg"] == pytest.approx(first.carbon_kg + second.carbon_kg)
    # taken back when Slurm reports the job ended before the tick that counted it
    done = Job(1, state=JobState.COMPLETED, start_time=hour + 600, end_time=hour + 3600)
    store.account_usage(hour + 4600, [done], signal)
    assert store.spent(hour + 3600, hour + 7200).energy_kwh == pytest.approx(0.0, abs=1e-12)
    assert store.spent(hour, hour + 7200).energy_kwh == pytest.approx(50 / 60)
    store.prune(hour + 4000)  # a job still known keeps its usage, however old ...
    assert store.spent(hour, hour + 3600).energy_kwh == pytest.approx(50 / 60)
    store.prune(hour + 7200)  # the job goes (last seen at hour + 4500); its usage a budget period later
    assert store.spent(hour, hour + 3600).energy_kwh == pytest.approx(50 / 60) and store.jobs() == []
    store.prune(hour + 7200 + USAGE_KEPT_BEYOND_RETENTION_S)
    assert store.spent(hour, hour + 3600).energy_kwh == 0.0


def test_latest_decisions_of_the_jobs_asked_for_in_chunks_the_same_as_of_all(tmp_path):
    store = StateStore(tmp_path / "s.db")
    for job_id in range(1, 1201):  # more ids than one IN (...) query takes
        store.record_decisions(NOW, [JobDecision(job_id, start_at=NOW, reason="first")])
    store.record_decisions(NOW + 300, [JobDecision(7, start_at=NOW + 600, reason="moved")])
    asked = store.latest_decisions(range(1, 1201))
    assert asked == store.latest_decisions() and asked[7]["reason"] == "moved" and len(asked) == 1200
    assert list(store.latest_decisions([7, 99999])) == [7]


def test_a_jobs_rates_are_averaged_per_gpu_count_once_per_report_and_restart_on_a_new_state(tmp_path):
    store = StateStore(tmp_path / "s.db")
    seen = [JobProgress(7, "samples", 0.0, per_s, 0.0, NOW + i) for i, per_s in enumerate((10.0, 12.0))]
    store.record_rates([(7, 1, seen[0])])
    store.record_rates([(7, 1, seen[1]), (7, 2, JobProgress(7, "samples", 0.0, 15.0, 0.0, NOW)),
                        (8, 1, JobProgress(8, "samples", 0.0, 3.0, 0.0, NOW))])
    store.record_rates([(7, 1, seen[1])])  # the same report read again at the next tick counts once
    assert store.rates([7]) == {7: (MeasuredRate(1, "samples", 0.0, 11.0, 2), MeasuredRate(2, "samples", 0.0, 15.0, 1))}
    # frozen further (or another unit): a new pace, the mean starts again
    store.record_rates([(7, 1, JobProgress(7, "samples", 0.0, 20.0, 0.25, NOW + 5)),
                        (7, 2, JobProgress(7, "steps", 0.0, 0.5, 0.0, NOW + 5))])
    assert store.rates([7, 9]) == {7: (MeasuredRate(1, "samples", 0.25, 20.0, 1), MeasuredRate(2, "steps", 0.0, 0.5, 1))}


def test_prune_forgets_the_rates_of_forgotten_jobs(tmp_path):
    store = StateStore(tmp_path / "s.db")
    old = Job(1, state=JobState.COMPLETED, start_time=NOW - 99 * 86400, end_time=NOW - 98 * 86400)
    store.observe_jobs(NOW - 98 * 86400, [old])
    store.record_rates([(1, 1, JobProgress(1, "samples", 0.0, 10.0, 0.0, NOW - 98 * 86400))])
    store.prune(NOW - 90 * 86400)
    assert store.rates([1]) == {}


def test_a_second_writer_waits_for_a_ticks_transaction_instead_of_failing_it(tmp_path):
    """``slurm-green run --once`` beside the daemon: its write, made while a tick's transaction
    has read and not yet written, waits for the tick to commit (the tick takes the write lock
    when it begins); with a plain BEGIN the tick failed at once, "database is locked"."""
    path = tmp_path / "state.db"
    daemon, other = StateStore(path), StateStore(path)
    daemon.record_decisions(NOW - 60, [JobDecision(1, start_at=NOW - 600, expected_energy_kwh=1.0,
                                                   expected_runtime_s=3600)])
    job = Job(1, state=JobState.RUNNING, start_time=NOW - 600)
    daemon.observe_jobs(NOW, [job])
    writers: list[threading.Thread] = []

    class Signal:  # consulted inside account_usage's transaction, between its read and its write
        def mean_over(self, start, end):
            writers.append(threading.Thread(target=other.record_tick, args=(NOW + 1, "window", None, [], 0, 0, [])))
            writers[-1].start()
            time.sleep(0.3)  # the other writer is now at its write
            return 300.0

    daemon.account_usage(NOW, [job], Signal())
    for writer in writers:
        writer.join(10)
    assert daemon.jobs()[0]["energy_kwh"] > 0 and writers
    assert len(daemon.ticks()) == 1  # the other's tick, after ours


def test_prune_keeps_the_usage_of_a_job_still_running_however_old(tmp_path):
    """A weekly budget with retention_days = 1: a job running since Monday keeps all its usage,
    or on Thursday the budget would see a third of what it drew and loosen the plan."""
    store = StateStore(tmp_path / "s.db")
    start = NOW // 86400 * 86400
    store.record_decisions(start, [JobDecision(1, start_at=start, expected_energy_kwh=24.0, expected_runtime_s=86400)])
    job = Job(1, state=JobState.RUNNING, start_time=start)
    now = start
    for _ in range(72):  # hourly ticks for three days, at 1 kW
        now += 3600
        store.observe_jobs(now, [job])
        store.account_usage(now, [job], hourly_signal([100.0] * 80))
    store.prune(now - 86400)
    assert store.spent(start, now).energy_kwh == pytest.approx(72.0)


def test_prune_keeps_the_current_weeks_usage_of_jobs_that_ended_earlier_in_it(tmp_path):
    """retention_days = 1 with a weekly budget: on Thursday the job that ran on Monday is
    forgotten, but what it drew still counts in the week's spend."""
    from slurm_green.controller.assemble import build_budget
    from slurm_green.controller.config import Config

    monday = 1_789_948_800.0  # 2026-09-21 00:00 UTC, a Monday
    config = Config.model_validate({"controller": {"retention_days": 1}, "policy": {"name": "powerflow"},
                                    "budget": {"period": "week", "energy_kwh": 100.0}})
    budget = build_budget(config)
    assert budget is not None and config.controller.retention_days is not None
    index = pd.date_range(pd.Timestamp(monday - 86400, unit="s", tz="UTC"), periods=24 * 9, freq="h")
    signal = CarbonSignal.from_series(pd.Series(100.0, index=index))
    store = StateStore(tmp_path / "s.db")
    store.record_decisions(monday, [JobDecision(1, start_at=monday, expected_energy_kwh=24.0,
                                                expected_runtime_s=86400)])
    now = monday
    job = Job(1, state=JobState.RUNNING, start_time=monday)
    for _ in range(24):  # Monday: 1 kW for 24 h, hourly ticks
        now += 3600
        store.observe_jobs(now, [job])
        store.account_usage(now, [job], signal)
    done = Job(1, state=JobState.COMPLETED, start_time=monday, end_time=monday + 86400)
    store.observe_jobs(now + 60, [done])
    store.account_usage(now + 60, [done], signal)
    thursday = monday + 3 * 86400
    assert budget.status(store, thursday).spent == pytest.approx(24.0)
    assert store.prune(thursday - config.controller.retention_days * 86400) == 1  # what the tick does hourly
    assert store.jobs() == []
    assert budget.status(store, thursday).spent == pytest.approx(24.0)
    # a forgotten job's usage goes once older than the retention and a longest period more
    assert store.prune(monday + 86400 + 8 * 86400 + 1) == 0
    assert store.spent(monday, monday + 7 * 86400).energy_kwh == pytest.approx(0.0)


def test_metered_energy_adds_up_the_runs_of_a_job_and_counts_each_record_once(tmp_path):
    store = StateStore(tmp_path / "s.db")
    store.observe_jobs(NOW, [Job(1, name="resnet50", state=JobState.COMPLETED, start_time=NOW - 600, end_time=NOW)])
    assert store.record_metered_run(1, [("1.node1.100.energy.json", 1.0), ("1.node2.101.energy.json", 0.5)]) \
        == (True, "resnet50")
    assert store.record_metered_run(1, [("1.node1.100.energy.json", 1.0)]) == (False, "resnet50")  # again
    assert store.record_metered_run(1, [("1.node1.9000.energy.json", 2.0)])[1] == "resnet50"  # the requeued run
    assert store.job(1)["metered_energy_kwh"] == pytest.approx(3.5)
    store.prune(NOW + 1)
    assert store.job(1) is None and not store._db.execute("SELECT * FROM metered").fetchall()
