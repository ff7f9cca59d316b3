import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from policy_literals import context

from slurm_green.carbon.signal import CarbonSignal
from slurm_green.controller.planner import plan_actions
from slurm_green.core.actions import SetTimeLimit
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.core.models import Config
from slurm_green.core.plan import Plan
from slurm_green.policy.window import WindowPolicy

T0 = pd.Timestamp("2023-06-01T00:00:00Z")
NOW = T0.timestamp()
HOUR = 3600.0


@dataclass
class LinearModel:
    """Literal test model: perfect scaling, throughput and power proportional to the cap."""

    job_type: str = "test"

    def throughput(self, config: Config) -> float:
        return config.gpus * (0.5 + 0.5 * config.cap_fraction)

    def power_w(self, config: Config) -> float:
        return config.gpus * 300.0 * config.cap_fraction


class Models:
    revision = 0

    def for_job(self, job_type, gpu=None):
        return LinearModel()

    def allowed_caps(self, gpu, *, accept_cap=True, floor=0.0, step=0.05):
        return tuple(sorted({max(0.3, floor), 1.0}))


def signal(values):
    index = pd.date_range(T0, periods=len(values), freq="h")
    return CarbonSignal.from_series(pd.Series(np.asarray(values, dtype=float), index=index))


def job(job_id=1, flex_h=12.0, runtime_h=2.0, cap=True, managed=True, state=JobState.PENDING):
    options = GreenOptions(managed=managed, max_delay_s=flex_h * HOUR, accept_cap=cap)
    return Job(job_id, state=state, submit_time=NOW, time_limit_s=runtime_h * HOUR, gpus_per_node=2,
               admin_comment=format_marker(options))


#: high carbon now, a clear 3-hour dip from 06:00, high again after
CURVE = [400] * 6 + [100] * 3 + [400] * 39


def test_job_is_deferred_to_the_low_carbon_window():
    (decision,) = WindowPolicy()(context(ClusterSnapshot(NOW, jobs=(job(),)), signal(CURVE), Models())).decisions
    assert decision.start_at == NOW + 6 * HOUR
    assert decision.expected_carbon_kg < decision.carbon_if_now_kg
    assert decision.power_cap_fraction == 0.7
    assert "deferred 6.0 h" in decision.reason


def test_window_beyond_the_deadline_is_not_used():
    (decision,) = WindowPolicy()(context(ClusterSnapshot(NOW, jobs=(job(flex_h=3),)), signal(CURVE), Models())).decisions
    assert NOW <= decision.start_at <= NOW + 3 * HOUR


def test_best_window_now_releases_at_once():
    curve = [50] * 3 + [400] * 45
    (decision,) = WindowPolicy()(context(ClusterSnapshot(NOW, jobs=(job(),)), signal(curve), Models())).decisions
    assert decision.start_at == NOW
    assert "now" in decision.reason


def test_without_forecast_every_managed_job_starts_now():
    plan = WindowPolicy()(context(ClusterSnapshot(NOW, jobs=(job(1), job(2))), None, Models()))
    assert [d.start_at for d in plan.decisions] == [NOW, NOW]
    assert any("carbon-agnostic" in note for note in plan.notes)


def test_unmanaged_running_and_unmarked_jobs_are_left_alone():
    jobs = (job(1, managed=False), job(2, state=JobState.RUNNING), Job(3, comment="green:flex=24h"))
    assert WindowPolicy()(context(ClusterSnapshot(NOW, jobs=jobs), signal(CURVE), Models())).decisions == ()


@pytest.mark.parametrize("cap, expected", [(True, 0.7), (False, None)])
def test_cap_only_for_jobs_that_accept_it(cap, expected):
    (decision,) = WindowPolicy()(context(ClusterSnapshot(NOW, jobs=(job(cap=cap),)), signal(CURVE), Models())).decisions
    assert decision.power_cap_fraction == expected


def test_capped_job_runs_longer_but_uses_less_energy():
    capped = WindowPolicy(cap_fraction=0.5)(context(ClusterSnapshot(NOW, jobs=(job(),)), None, Models())).decisions[0]
    full = WindowPolicy(cap_fraction=None)(context(ClusterSnapshot(NOW, jobs=(job(),)), None, Models())).decisions[0]
    assert capped.expected_runtime_s > full.expected_runtime_s
    assert capped.expected_energy_kwh < full.expected_energy_kwh


def test_a_capped_jobs_raised_limit_is_not_read_back_as_its_work():
    """Tick after tick the same cap gives the same limit: the policy reads the job's work from
    the limit as submitted (the marker's), not from the limit the controller raised."""
    options = GreenOptions(max_delay_s=12 * HOUR, time_limit_s=2 * HOUR)
    pending = Job(1, submit_time=NOW, time_limit_s=2 * HOUR, gpus_per_node=2, admin_comment=format_marker(options))
    raised = []
    for _ in range(3):
        snap = ClusterSnapshot(NOW, jobs=(pending,))
        decision = WindowPolicy(cap_fraction=0.5)(context(snap, None, Models())).decisions[0]
        limits = [a for a in plan_actions(snap, Plan((decision,)), NOW) if isinstance(a, SetTimeLimit)]
        raised.append((decision.expected_runtime_s, limits))
        if limits:
            pending = dataclasses.replace(pending, time_limit_s=limits[0].seconds)
    slowed = 2 * HOUR / 0.75  # throughput x0.75 at cap 0.5
    assert raised == [(slowed, [SetTimeLimit(1, slowed)]), (slowed, []), (slowed, [])]


def test_window_plans_on_the_nodes_gpu_type_and_raises_a_cap_to_the_boards_minimum():
    from slurm_green.core.cluster import Node
    from slurm_green.models.registry import default_registry

    registry = default_registry()
    registry.observe_board("h100", min_w=560.0, max_w=700.0, default_w=700.0)  # settable down to 0.8 only
    options = GreenOptions(max_delay_s=0.0, accept_cap=True)
    job = Job(1, name="resnet50", submit_time=NOW, time_limit_s=HOUR, gpus_per_node=1,
              admin_comment=format_marker(options))
    snapshot = ClusterSnapshot(taken_at=NOW, jobs=(job,), nodes=(Node("h0", gpus_total=4, gpu_type="h100"),))
    decision = WindowPolicy(cap_fraction=0.7)(context(snapshot, None, registry)).decisions[0]
    assert decision.gpu_type == "h100" and decision.power_cap_fraction == 0.8
    model = registry.for_job("resnet50", "h100")
    assert decision.expected_energy_kwh == pytest.approx(
        model.power_w(Config(1, 1, 0.8)) * HOUR * model.throughput(Config(1, 1)) / model.throughput(Config(1, 1, 0.8))
        / 3.6e6)
