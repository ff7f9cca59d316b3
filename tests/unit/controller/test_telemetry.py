"""The controller's energy inbox, and a tick that learns from it."""

from __future__ import annotations

import dataclasses
import logging
import os

import pytest
from test_tick import NOW, MemoryBackend, config, deferred_job  # noqa: F401 - fixtures

from slurm_green.controller.assemble import assemble
from slurm_green.controller.telemetry import EnergyInbox
from slurm_green.core import telemetry
from slurm_green.core.clock import ManualClock
from slurm_green.core.telemetry import NodeEnergy
from slurm_green.core.models import Config as ModelConfig


def leave(directory, job_id: int, node: str, energy_j: float = 3600.0, seconds: float = 10.0, **kw) -> None:
    telemetry.write(directory, NodeEnergy(job_id, node, kw.pop("gpus", 2), energy_j, seconds, **kw))


def test_a_jobs_energy_is_taken_once_every_node_has_reported(tmp_path) -> None:
    inbox = EnergyInbox(tmp_path)
    leave(tmp_path, 5, "node1", 1000.0, 20.0)
    assert inbox.collect(NOW, lambda job_id: 2) == []  # node2's Epilog has not written yet
    assert len(list(tmp_path.iterdir())) == 1
    leave(tmp_path, 5, "node2", 3000.0, 25.0, shared=True)
    (run,) = inbox.collect(NOW, lambda job_id: 2)
    assert (run.job_id, run.energy_j, run.seconds, run.gpus, run.nodes, run.shared) == (5, 4000.0, 25.0, 4, 2, True)
    assert run.mean_power_w == 160.0 and list(tmp_path.iterdir()) == []


def test_other_jobs_garbage_and_stale_halves_are_removed(tmp_path, caplog) -> None:
    inbox = EnergyInbox(tmp_path, stale_after_s=3600)
    leave(tmp_path, 6, "node1")  # not a job the controller decided
    leave(tmp_path, 7, "node1")  # half of a two-node job whose other node never wrote
    os.utime(tmp_path / "7.node1.energy.json", (NOW - 7200, NOW - 7200))
    (tmp_path / "8.node1.energy.json").write_text("{not json")
    with caplog.at_level(logging.WARNING):
        assert inbox.collect(NOW, lambda job_id: None if job_id == 6 else 2) == []
    assert list(tmp_path.iterdir()) == []
    assert "malformed" in caplog.text and "1 of its 2 nodes" in caplog.text


@pytest.mark.parametrize("bad", [dict(energy_j=float("nan")), dict(seconds=-1.0), dict(gpus=0), dict(node="../x"),
                                 dict(started_at=float("inf"))])
def test_a_record_that_is_no_measurement_is_refused(bad) -> None:
    fields = dict(job_id=1, node="node1", gpus=1, energy_j=1.0, seconds=1.0) | bad
    with pytest.raises(ValueError):
        NodeEnergy(**fields)


def test_a_tick_records_metered_energy_and_corrects_the_models_power(config, tmp_path) -> None:  # noqa: F811
    spool = tmp_path / "telemetry"
    config = config.model_copy(update={"controller": config.controller.model_copy(update={
        "telemetry_dir": spool, "model_corrections": tmp_path / "corrections.json"})})
    parts = assemble(config, clock=ManualClock(NOW))
    controller, models = parts.controller, parts.controller.models
    controller.backend = MemoryBackend([deferred_job(1)])
    controller.tick(NOW)  # decides job 1: one GPU, the policy's cap
    decision = controller.store.latest_decisions()[1]
    cap = float(decision["cap_fraction"] or 1.0)
    ran = ModelConfig(gpus=1, nodes=1, cap_fraction=cap)
    predicted = models.for_job("resnet50").power_w(ran)
    leave(spool, 1, "node1", energy_j=predicted * 1.5 * 600, seconds=600, gpus=1)  # it drew 1.5x the model
    report = controller.tick(NOW + 600)
    assert report.notes[-1] == "1 measurement(s) of finished jobs taught the models"
    assert models.for_job("resnet50").power_w(ran) == pytest.approx(predicted * 1.5 ** 0.5)  # half way, in log space
    (job,) = controller.store.jobs()
    assert job["metered_energy_kwh"] == pytest.approx(predicted * 1.5 * 600 / 3.6e6)
    assert (tmp_path / "corrections.json").exists() and list(spool.iterdir()) == []


def test_records_are_readable_by_the_controller_and_an_unreadable_one_is_kept(tmp_path, caplog) -> None:
    leave(tmp_path, 9, "node1")
    assert (tmp_path / "9.node1.energy.json").stat().st_mode & 0o777 == 0o644  # the Epilog is root, the controller not
    (tmp_path / "10.node1.energy.json").mkdir()  # cannot be read (as permissions would, even for root)
    with caplog.at_level(logging.WARNING):
        (run,) = EnergyInbox(tmp_path).collect(NOW, lambda job_id: 1)
    assert run.job_id == 9
    assert (tmp_path / "10.node1.energy.json").exists() and "cannot read" in caplog.text


def test_a_gpu_freq_site_stores_metered_energy_but_does_not_teach_caps(config, tmp_path) -> None:  # noqa: F811
    spool = tmp_path / "telemetry"
    config = config.model_copy(update={
        "controller": config.controller.model_copy(update={"telemetry_dir": spool}),
        "gpu": config.gpu.model_copy(update={"enact": "gpu_freq"})})
    parts = assemble(config, clock=ManualClock(NOW))
    controller = parts.controller
    controller.backend = MemoryBackend([deferred_job(1)])
    controller.tick(NOW)
    leave(spool, 1, "node1", energy_j=3.6e6, seconds=3600, gpus=1)
    report = controller.tick(NOW + 600)
    assert not any("taught the models" in note for note in report.notes)
    assert controller.store.jobs()[0]["metered_energy_kwh"] == pytest.approx(1.0)
    assert not controller.models.corrections


def test_the_board_limits_a_node_reported_reach_the_models(config, tmp_path) -> None:  # noqa: F811
    """An H100 whose NVML says 150-600 W (not the profiled 200-700 W): the cap set follows the node."""
    spool = tmp_path / "telemetry"
    config = config.model_copy(update={"controller": config.controller.model_copy(update={"telemetry_dir": spool})})
    parts = assemble(config, clock=ManualClock(NOW))
    controller = parts.controller
    controller.backend = MemoryBackend([dataclasses.replace(deferred_job(1), gpu_type="h100")])
    controller.tick(NOW)
    leave(spool, 1, "node1", energy_j=3.6e5, seconds=3600, gpus=1, board_min_w=150.0, board_max_w=600.0,
          board_default_w=600.0)
    report = controller.tick(NOW + 600)
    assert report.notes[-1] == "1 measurement(s) of finished jobs taught the models"
    board = controller.models.board("h100")
    assert (board.min_w, board.max_w, board.default_w) == (150.0, 600.0, 600.0)


def _requeued_job(tmp_path):
    from slurm_green.controller.store import StateStore
    from slurm_green.controller.telemetry import MeteredEnergy
    from slurm_green.core.cluster import ClusterSnapshot, Job, JobState
    from slurm_green.core.plan import JobDecision

    store = StateStore(tmp_path / "state.db")
    job = Job(7, user="alice", name="resnet50", state=JobState.RUNNING, gpus_per_node=1, nodes=("node1",),
              start_time=NOW - 7200)
    store.observe_jobs(NOW - 7200, [job])
    store.record_decisions(NOW - 7200, [JobDecision(7, gpus_per_node=1, num_nodes=1, expected_energy_kwh=1.0,
                                                    expected_runtime_s=3600)])
    return store, MeteredEnergy(EnergyInbox(tmp_path / "telemetry"), store), ClusterSnapshot(taken_at=NOW, jobs=(job,))


def test_a_job_that_ran_twice_under_its_id_counts_both_runs_metered_energy(tmp_path) -> None:
    """Requeued (node failure, preemption) or resized: an older Epilog's records, one name for
    every run, collected a tick apart, add up instead of the second replacing the first."""
    spool = tmp_path / "telemetry"
    store, metered, snapshot = _requeued_job(tmp_path)
    telemetry.write(spool, NodeEnergy(7, "node1", 1, 3.6e6, 3600.0))  # the first run: 1 kWh
    assert len(metered.observations(NOW, snapshot)) == 1
    telemetry.write(spool, NodeEnergy(7, "node1", 1, 7.2e6, 3600.0))  # the second: 2 kWh
    assert len(metered.observations(NOW + 7200, snapshot)) == 1
    assert store.job(7)["metered_energy_kwh"] == pytest.approx(3.0)


def test_each_runs_record_has_a_name_of_its_own_and_both_count_when_one_tick_finds_them(tmp_path) -> None:
    spool = tmp_path / "telemetry"
    store, metered, snapshot = _requeued_job(tmp_path)
    first = telemetry.write(spool, NodeEnergy(7, "node1", 1, 3.6e6, 3600.0, started_at=NOW - 7200))
    second = telemetry.write(spool, NodeEnergy(7, "node1", 1, 7.2e6, 3600.0, started_at=NOW - 3000))
    assert first != second and first.name == f"7.node1.{int(NOW - 7200)}.energy.json"
    assert len(metered.observations(NOW, snapshot)) == 2
    assert store.job(7)["metered_energy_kwh"] == pytest.approx(3.0) and list(spool.iterdir()) == []


def test_a_multi_node_jobs_runs_are_told_apart_by_their_start(tmp_path) -> None:
    inbox = EnergyInbox(tmp_path)
    for node, skew in (("node1", 0.0), ("node2", 4.0)):  # the Prologs of one run start seconds apart
        leave(tmp_path, 5, node, 1000.0, started_at=NOW - 9000 + skew)
        leave(tmp_path, 5, node, 2000.0, started_at=NOW - 3000 + skew)
    leave(tmp_path, 5, "node1", 500.0, started_at=NOW - 600)  # a third run, its node2 not written yet
    runs = inbox.collect(NOW, lambda job_id: 2)
    assert [(run.energy_j, run.nodes, run.started_at) for run in runs] == [(2000.0, 2, NOW - 9000),
                                                                           (4000.0, 2, NOW - 3000)]
    assert [path.name for path in tmp_path.iterdir()] == [f"5.node1.{int(NOW - 600)}.energy.json"]


@pytest.mark.parametrize("started_at", [None, NOW - 3600])
def test_a_run_handed_in_again_by_a_tick_killed_before_removing_its_files_counts_once(tmp_path, started_at) -> None:
    spool = tmp_path / "telemetry"
    store, metered, snapshot = _requeued_job(tmp_path)
    telemetry.write(spool, NodeEnergy(7, "node1", 1, 3.6e6, 3600.0, started_at=started_at))

    def killed(run) -> None:
        store.record_metered_run(run.job_id, [(key, j / 3.6e6) for key, j in run.records])
        raise KeyboardInterrupt  # stopped after the store's transaction, before the unlink

    with pytest.raises(KeyboardInterrupt):
        metered.inbox.collect(NOW, lambda job_id: 1, killed)
    assert len(list(spool.iterdir())) == 1
    assert metered.observations(NOW + 60, snapshot) == []  # nothing new: the models learn it once
    assert store.job(7)["metered_energy_kwh"] == pytest.approx(1.0) and list(spool.iterdir()) == []
