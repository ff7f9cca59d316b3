from __future__ import annotations

import math

import pytest

from slurm_green.core.models import Config
from slurm_green.models.refine import MAX_FACTOR, Corrections
from slurm_green.models.registry import FittedRegistry, fitted_params

CFG = Config(gpus=4, nodes=1, cap_fraction=0.7)


def test_an_observation_moves_the_prediction_toward_it_but_not_all_the_way(registry: FittedRegistry) -> None:
    model = registry.for_job("imagenet")
    before = model.throughput(CFG)
    registry.observe("imagenet", CFG, measured_throughput=before * 0.5)
    after = model.throughput(CFG)
    assert before * 0.5 < after < before
    assert after == pytest.approx(before * math.sqrt(0.5))  # half-way in log space


def test_repeated_observations_converge_and_stay_bounded(registry: FittedRegistry) -> None:
    model = registry.for_job("bert")
    base = model.model_power_w(CFG)
    for _ in range(50):
        registry.observe("bert", CFG, measured_power_w=base * 1.2)
    assert model.power_w(CFG) == pytest.approx(base * 1.2, rel=0.01)
    for _ in range(100):
        registry.observe("bert", CFG, measured_power_w=base * 1000)
    assert model.power_w(CFG) <= base * MAX_FACTOR * (1 + 1e-9)


def test_type_wide_correction_reaches_unobserved_configs_and_other_types_stay(registry: FittedRegistry) -> None:
    m = registry.for_job("cifar10")
    other = Config(8, 2, 1.0)
    before, untouched = m.throughput(other), registry.for_job("ncf").throughput(other)
    registry.observe("cifar10", CFG, measured_throughput=m.throughput(CFG) * 1.5)
    assert m.throughput(other) > before
    assert registry.for_job("ncf").throughput(other) == untouched


def test_corrections_persist_as_json(perf, tmp_path) -> None:
    path = tmp_path / "corr.json"
    first = FittedRegistry(fitted_params(perf), Corrections(path))
    first.observe("resnet50", CFG, measured_throughput=1.0, measured_power_w=400.0)
    second = FittedRegistry(fitted_params(perf), Corrections(path))
    assert second.for_job("resnet50").throughput(CFG) == pytest.approx(first.for_job("resnet50").throughput(CFG))
    assert second.for_job("resnet50").power_w(CFG) == pytest.approx(first.for_job("resnet50").power_w(CFG))


def test_unknown_jobs_are_corrected_by_their_own_name(registry: FittedRegistry) -> None:
    registry.observe("job-a", CFG, measured_throughput=registry.for_job("job-a").throughput(CFG) * 2)
    assert registry.for_job("job-a").throughput(CFG) > registry.for_job("job-b").throughput(CFG)


def test_non_positive_measurements_are_rejected(registry: FittedRegistry) -> None:
    with pytest.raises(ValueError):
        registry.observe("bert", CFG, measured_throughput=0.0)
