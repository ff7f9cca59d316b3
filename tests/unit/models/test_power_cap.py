from __future__ import annotations

import pytest

from slurm_green.models import power_cap
from slurm_green.models.power_cap import CapParams, GpuPowerParams
from slurm_green.models.profiles import CapRow

GPU = GpuPowerParams("test", tdp_w=250.0, idle_w=30.0, draw_ratio=0.95, exponent=2.5, cap_min=0.4)


def _rows(cap: CapParams, gpu: GpuPowerParams = GPU) -> list[CapRow]:
    return [CapRow(c, 100.0 * power_cap.slowdown(gpu, cap, c), power_cap.busy_power_w(gpu, cap, c))
            for c in (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)]


def test_fit_job_recovers_beta_and_natural_power() -> None:
    truth = CapParams(natural_power_fraction=0.85, beta=0.12)
    fitted = power_cap.fit_job(_rows(truth), GPU)
    assert fitted.natural_power_fraction == pytest.approx(0.85)
    assert fitted.beta == pytest.approx(0.12)


def test_fit_gpu_recovers_the_shared_exponent() -> None:
    groups = {i: _rows(CapParams(u, b)) for i, (u, b) in enumerate([(0.9, 0.1), (0.7, 0.2), (0.8, 0.05)])}
    assert power_cap.fit_gpu("test", 250.0, groups).exponent == pytest.approx(2.5, abs=0.05)


def test_a_job_that_never_reaches_the_cap_is_unaffected() -> None:
    light = CapParams(natural_power_fraction=0.2, beta=0.3)
    assert power_cap.slowdown(GPU, light, 0.4) == 1.0
    assert power_cap.busy_power_w(GPU, light, 0.4) == pytest.approx(50.0)
