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


@pytest.mark.parametrize("bad", [dict(energy_j=float("nan")), dict(seconds=-1.0), dict(gpus=0), dict(node="../x")])
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
