"""The effective-progress model of layer freezing (models/freezing.py)."""

from __future__ import annotations

import math

import pytest

from slurm_green.core.models import Config
from slurm_green.models import freezing
from slurm_green.models.freezing import FITTED, FreezeParams, FreezeRow, fit_rows


def test_refitting_the_sweep_reproduces_the_parameters_in_code(perf) -> None:
    assert freezing.fit(perf) == FITTED


def test_fit_recovers_known_parameters_from_exact_rows() -> None:
    truth = FreezeParams(skip=0.6, power_drop=0.1)
    rows = [FreezeRow("w", f, f / 10, 20.0 * truth.speedup(f), 500.0 * (1 - 0.1 * f), 0.0) for f in (0, 0.25, 0.5, 1)]
    got = fit_rows(rows)
    assert got.skip == pytest.approx(0.6) and got.power_drop == pytest.approx(0.1)


def test_power_rising_with_freezing_is_not_taken_as_a_saving() -> None:
    rows = [FreezeRow("w", 0, 0, 10.0, 500.0, 0.0), FreezeRow("w", 0.5, 0.1, 12.0, 520.0, 0.0)]
    assert fit_rows(rows).power_drop == 0.0


def test_compute_not_parameters_counts_resnet50_three_of_five_blocks(perf) -> None:
    """5.7 % of the parameters frozen, 1.58x measured: the block share predicts it, not the parameter share."""
    rows = {r.frozen: r for r in freezing.read_sweep(perf) if r.workload == "resnet50"}
    measured = rows[0.6].steps_per_s / rows[0].steps_per_s
    assert FITTED["resnet50"].speedup(0.6) == pytest.approx(measured, rel=0.1)
    assert abs(FITTED["resnet50"].speedup(rows[0.6].param_share) - measured) > 0.4


def test_known_families_use_their_workload_and_unknown_types_the_least_gaining_fit() -> None:
    assert freezing.workload_for("ResNet-50 (batch size 64)") == "resnet50"
    assert freezing.workload_for("train_imagenet.sh") == "resnet50"
    assert freezing.workload_for("bert-finetune") == "transformer"
    assert freezing.workload_for("my_gan") is None
    default = freezing.params_for("my_gan")
    assert default.skip == min(p.skip for p in FITTED.values()) and default.power_drop == 0.0


def test_the_effective_rate_on_one_gpu_is_the_measured_speedup_penalised() -> None:
    transformer = type("Transformer", (_HalfSync,), {"job_type": "Transformer (batch size 64)"})()
    one = transformer.throughput(Config(1))
    assert freezing.effective_rate(transformer, Config(1), 0.0) == one
    raw = FITTED["transformer"].speedup(0.75)
    assert freezing.effective_rate(transformer, Config(1), 0.75) == pytest.approx(one * raw * (1 - 0.5 * 0.75))
    assert freezing.effective_rate(transformer, Config(1), 0.75, slope=0.0) == pytest.approx(one * raw)


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, math.inf])
def test_a_frozen_share_outside_zero_to_one_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="frozen share"):
        freezing.penalty(bad)


def test_held_back_error_beats_the_naive_and_parameter_share_models(perf) -> None:
    by_rows, by_workload = freezing.holdout(perf)
    assert by_rows.rows == 8 and by_workload.rows == 8
    assert by_rows.steps_mape < by_rows.steps_naive_mape and by_rows.steps_mape < by_rows.steps_param_share_mape
    assert by_rows.energy_mape < by_rows.energy_naive_mape
    assert by_workload.steps_param_share_mape is None and by_workload.steps_mape < by_workload.steps_naive_mape


class _HalfSync:
    """Half of each step on 2 or more GPUs is synchronisation; 100 W per GPU."""

    job_type = "unknown-type"

    def throughput(self, config: Config) -> float:
        return 1.0 if config.gpus == 1 else config.gpus / 2.0

    def power_w(self, config: Config) -> float:
        return 100.0 * config.gpus


def test_freezing_shortens_compute_not_synchronisation() -> None:
    """On one GPU the measured speedup; on four, where half of a step synchronises, that of a
    step with half the compute; the penalty on both. Power falls by the fitted drop."""
    model, skip = _HalfSync(), freezing.default_params(FITTED).skip
    assert freezing.compute_share(model, Config(1)) == 1.0 and freezing.compute_share(model, Config(4)) == 0.5
    one = freezing.effective_rate(model, Config(1), 0.5) / model.throughput(Config(1))
    four = freezing.effective_rate(model, Config(4), 0.5) / model.throughput(Config(4))
    assert one == pytest.approx(0.75 / (1 - skip * 0.5))
    assert four == pytest.approx(0.75 / (1 - skip * 0.5 * 0.5)) and four < one
    assert freezing.effective_rate(model, Config(4), 0.0) == model.throughput(Config(4))
    assert freezing.effective_rate(model, Config(4), 0.5, slope=0.0) == pytest.approx(2.0 / (1 - skip * 0.25))
    resnet = type("ResNet", (_HalfSync,), {"job_type": "ResNet-50"})()
    assert freezing.frozen_power_w(resnet, Config(2), 0.5) == pytest.approx(200.0 * (1 - FITTED["resnet50"].power_drop * 0.5))
    assert freezing.frozen_power_w(model, Config(2), 0.5) == 200.0  # unknown types: no drop

