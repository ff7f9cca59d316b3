import json
import math

import numpy as np
import pytest

from slurm_green.cli.sim import _speedup_lines
from slurm_green.policy.lower_bound import LowerBound
from slurm_green.sim.bench import BenchResult, Point, best_at, speedup_text, versus_best
from slurm_green.sim.runner import RunResult


def pts(*xs):
    """Points (setting, JCT h, carbon kg); energy is carbon x 10."""
    return [Point(s, j * 3600.0, c * 10.0, c) for s, j, c in xs]


GREENFLOW = pts(("budget=1", 2.0, 100.0), ("budget=0.8", 3.0, 80.0), ("budget=0.6", 5.0, 90.0))


def test_best_at_takes_the_best_measured_setting_at_or_under_x_and_nan_below_the_sweep():
    assert best_at(GREENFLOW, "carbon_kg", 95.0) == 3.0 * 3600  # 0.8 and 0.6 fit; not monotone, no interpolation
    assert best_at(GREENFLOW, "carbon_kg", 100.0) == 2.0 * 3600
    assert math.isnan(best_at(GREENFLOW, "carbon_kg", 79.0))


def test_a_nan_speedup_reads_not_reached():
    assert speedup_text(float("nan")) == "not reached"
    assert speedup_text(None) == "not reached"
    assert speedup_text(1.3749) == "1.37x"


def test_versus_best_is_the_smallest_reachable_ratio_and_lists_what_is_out_of_reach():
    baselines = {"fifo": pts(("default", 4.0, 120.0)),
                 "window+cap": pts(("flex=0h", 2.5, 100.0), ("flex=24h", 9.0, 70.0))}
    v = versus_best(GREENFLOW, baselines, "carbon_kg")
    assert v.speedup == 1.25 and v.against == "window+cap flex=0h"
    assert v.not_reached == ["window+cap flex=24h"]
    nothing = versus_best(GREENFLOW, {"window+cap": pts(("flex=24h", 9.0, 70.0))}, "carbon_kg")
    assert math.isnan(nothing.speedup) and speedup_text(nothing.speedup) == "not reached"


def test_the_bench_report_and_json_say_not_reached_instead_of_nan():
    fifo = RunResult("fifo", {"avg_jct_s": 4 * 3600.0, "energy_kwh": 1200.0, "carbon_kg": 120.0}, None, 1, 0.1)
    result = BenchResult(runs={"fifo": fifo}, frontier={"greenflow": GREENFLOW},
                         lower_bound=LowerBound(60.0, np.array([60.0])),
                         equal_carbon={"fifo": 2.0, "window+cap": float("nan")}, equal_energy={"zeus": float("nan")})
    lines = _speedup_lines(result)
    assert not any("nan" in line.lower() for line in lines)
    assert "window+cap JCT / GreenFlow JCT = not reached" in lines[1]
    assert "PowerFlow at zeus's energy" in lines[2] and "not reached" in lines[2]
    data = json.loads(json.dumps(result.to_dict()), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert data["greenflow_jct_speedup_at_equal_carbon"] == {"fifo": 2.0, "window+cap": None}
    assert data["powerflow_jct_speedup_at_equal_energy"] == {"zeus": None}
