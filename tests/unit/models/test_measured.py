"""A job's model corrected by the rates its own reports gave at two GPU counts: only ever
down, never rising with the count, in the job's units whatever they are."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_green.core.models import Config
from slurm_green.core.progress import MeasuredRate
from slurm_green.models.freezing import frozen_throughput
from slurm_green.models.measured import FLOOR, MeasuredScaling, corrected, factor_at, scaling_factors


@dataclass
class Sublinear:
    """g^0.8 units per second at 100 W per GPU."""

    job_type: str = "literal"

    def throughput(self, config: Config) -> float:
        return config.gpus ** 0.8

    def power_w(self, config: Config) -> float:
        return 100.0 * config.gpus


def rate(gpus: int, per_s: float, frozen: float = 0.0, unit: str = "samples") -> MeasuredRate:
    return MeasuredRate(gpus, unit, frozen, per_s, 3)


def test_a_job_measured_to_scale_worse_is_scaled_down_from_its_smallest_count():
    model = corrected(Sublinear(), [rate(2, 500.0), rate(1, 400.0)])  # x1.25 measured, 2^0.8 = 1.74 modelled
    factor = 1.25 / 2 ** 0.8
    assert isinstance(model, MeasuredScaling)
    assert model.throughput(Config(1)) == 1.0
    assert model.throughput(Config(2)) == pytest.approx(1.25)
    assert model.throughput(Config(4)) == pytest.approx(4 ** 0.8 * factor)  # beyond: the last factor
    assert model.power_w(Config(4)) == 400.0 and model.job_type == "literal"
    assert "x0.72 at 2 GPUs" in model.said()


def test_a_report_of_better_scaling_changes_nothing():
    """The user writes the reports: claiming the job scales better than modelled cannot
    make more GPUs look worth more to it."""
    model = Sublinear()
    assert corrected(model, [rate(1, 10.0), rate(4, 1000.0)]) is model
    assert corrected(model, [rate(1, 10.0)]) is model                       # one count: nothing measured
    assert corrected(model, [rate(1, 10.0), rate(2, 1.0, unit="steps")]) is model  # units that do not compare
    assert corrected(model, []) is model


def test_the_factor_never_rises_with_the_gpu_count_and_is_interpolated_between_counts():
    points = scaling_factors(Sublinear(), [rate(1, 1.0), rate(2, 2 ** 0.8 * 0.5), rate(4, 4 ** 0.8 * 0.9)])
    assert points == ((1, 1.0), (2, pytest.approx(0.5)), (4, pytest.approx(0.5)))
    points = ((2, 1.0), (4, 0.6), (8, 0.4))
    assert [factor_at(points, g) for g in (1, 2, 3, 4, 6, 8, 16)] == pytest.approx([1, 1, 0.8, 0.6, 0.5, 0.4, 0.4])


def test_rates_at_other_frozen_shares_are_compared_with_the_model_at_those_shares():
    """A job that froze between its two sizes ran faster per step for that: the model's frozen
    throughput, not its plain one, is what its rate is measured against."""
    model = Sublinear()
    as_modelled = [rate(1, 7.0 * frozen_throughput(model, Config(1), 0.0)),
                   rate(2, 7.0 * frozen_throughput(model, Config(2), 0.5), frozen=0.5)]
    assert frozen_throughput(model, Config(2), 0.5) > model.throughput(Config(2))
    assert corrected(model, as_modelled) is model


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 16), st.floats(0.0, 1e300, allow_subnormal=True),
                          st.sampled_from([0.0, 0.25, 1.0]), st.sampled_from(["samples", "steps"])), max_size=6))
def test_whatever_a_user_reports_the_model_only_ever_goes_down_and_never_to_zero(reported):
    model = Sublinear()
    measured = [MeasuredRate(g, unit, frozen, per_s, 1) for g, per_s, frozen, unit in reported]
    job = corrected(model, measured)
    factors = [job.throughput(Config(g)) / model.throughput(Config(g)) for g in range(1, 33)]
    assert all(FLOOR - 1e-12 <= f <= 1 + 1e-12 for f in factors)
    assert all(a >= b - 1e-12 for a, b in zip(factors, factors[1:]))  # never rising with the count
