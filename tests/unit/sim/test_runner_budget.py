"""A budget per period through the simulator: the real controller paces GreenFlow from what its
real (in-memory) store accounted, so a tighter day budget buys less carbon with more waiting."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sim_literals import HOUR, T0, LinearModels, workload
from slurm_green.carbon.signal import CarbonSignal
from slurm_green.controller.budget import PeriodBudget
from slurm_green.controller.daemon import operated
from slurm_green.controller.store import StateStore
from slurm_green.controller.tick import Controller
from slurm_green.policy.baselines import FifoPolicy
from slurm_green.policy.greenflow import GreenFlowPolicy
from slurm_green.sim.carbon import SimCarbonFeed
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import Simulator, TraceOptions
from slurm_green.sim.runner import simulate


def dirty_then_clean(hours: int = 24 * 4) -> CarbonSignal:
    """500 g/kWh, except 50 g/kWh from 06:00 to 12:00 every day."""
    index = pd.date_range(pd.Timestamp(T0, unit="s", tz="UTC") - pd.Timedelta(hours=1), periods=hours, freq="h")
    return CarbonSignal.from_series(pd.Series(np.where((index.hour >= 6) & (index.hour < 12), 50.0, 500.0),
                                              index=index))


def run(limit_kg: float, store: StateStore):
    # One 1-GPU job of 2 GPU-hours every hour of the first day, 24 h of flexibility, on a big cluster.
    wl = workload(*[(h * HOUR, 1, 2 * HOUR) for h in range(24)])
    return simulate(wl, ClusterSpec(nodes=4, gpus_per_node=8), GreenFlowPolicy(), dirty_then_clean(), LinearModels(),
                    "test", TraceOptions(flex_s=24 * HOUR), budget=PeriodBudget("carbon", limit_kg), store=store)


def test_a_tight_day_budget_defers_to_clean_hours_and_a_loose_one_does_not():
    tight_store, loose_store = StateStore(":memory:"), StateStore(":memory:")
    tight, loose = run(0.01, tight_store), run(100.0, loose_store)
    # over the limit the plan budget is halved (min_scale): about half of each plan's jobs defer
    assert tight.summary["carbon_kg"] < 0.95 * loose.summary["carbon_kg"]
    assert tight.summary["avg_jct_s"] > loose.summary["avg_jct_s"]
    # what the store accounted per day is what the paced controller kept to (LinearModels: no idle power)
    days = [(T0 + d * 86400, T0 + (d + 1) * 86400) for d in range(3)]
    accounted = sum(tight_store.spent(a, b).carbon_kg for a, b in days)
    assert accounted == pytest.approx(tight.summary["carbon_kg"], rel=0.02)
    notes = [n for t in tight_store.ticks() for n in json.loads(str(t["notes"])) if n.startswith("budget:")]
    assert "plans at 1.00 x" in notes[0] and any("plans at 0.50 x" in n for n in notes)
    assert all("plans at 0.50 x" not in n for t in loose_store.ticks() for n in json.loads(str(t["notes"])))


def test_a_policy_that_keeps_no_budget_is_refused_one():
    sim = Simulator(workload((0.0, 1, HOUR)), ClusterSpec(nodes=1, gpus_per_node=1), LinearModels(), None, b"k" * 16,
                    TraceOptions())
    with pytest.raises(ValueError, match="fifo cannot keep one"):
        Controller(backend=sim, policy=FifoPolicy(), carbon=None, models=LinearModels(), store=StateStore(":memory:"),
                   budget=PeriodBudget("carbon", 1.0))


def test_the_pace_reaches_the_policy_behind_the_daemons_pause_switch(tmp_path):
    """``slurm-green run`` puts ``OperatedPolicy`` in front of the policy; the pace travels in the
    decision's context, so it still reaches GreenFlow (it once asked the wrapper for a method
    only GreenFlow has, and every budgeted tick failed)."""
    wl = workload(*[(h * HOUR, 1, 2 * HOUR) for h in range(6)])
    signal = dirty_then_clean()
    sim = Simulator(wl, ClusterSpec(nodes=1, gpus_per_node=8), LinearModels(), signal, b"k" * 16,
                    TraceOptions(flex_s=24 * HOUR))
    store = StateStore(":memory:")
    controller = Controller(backend=sim, policy=GreenFlowPolicy(), carbon=SimCarbonFeed(signal, "test"),
                            models=LinearModels(), store=store, budget=PeriodBudget("carbon", 0.01))
    operated(controller, tmp_path / "state.db")
    sim.run(controller)
    notes = [n for t in store.ticks() for n in json.loads(str(t["notes"]))]
    assert any("plans at 0.50 x" in n for n in notes)
    assert any("budget 0.075 kg CO2 (0.5 x carbon-agnostic" in n for n in notes)
