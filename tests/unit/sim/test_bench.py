import json
import math

import numpy as np
import pytest

from slurm_green.cli.sim import _speedup_lines
from slurm_green.policy.lower_bound import LowerBound
from slurm_green.sim.bench import BenchResult, Point, best_at, frontier_hull, interpolated_at, speedup_text, versus_best
from slurm_green.sim.runner import RunResult


def pts(*xs, finished=10):
    """Points (setting, JCT h, carbon kg) of runs that finished ``finished`` of 10 jobs; energy is carbon x 10."""
    return [Point(s, j * 3600.0, c * 10.0, c, finished, 10) for s, j, c in xs]


GREENFLOW = pts(("budget=1", 2.0, 100.0), ("budget=0.8", 3.0, 80.0), ("budget=0.6", 5.0, 90.0))


def test_best_at_takes_the_best_measured_setting_at_or_under_x_and_nan_below_the_sweep():
    assert best_at(GREENFLOW, "carbon_kg", 95.0) == 3.0 * 3600  # 0.8 and 0.6 fit; not monotone, no interpolation
    assert best_at(GREENFLOW, "carbon_kg", 100.0) == 2.0 * 3600
    assert math.isnan(best_at(GREENFLOW, "carbon_kg", 79.0))


def test_interpolation_reads_the_lower_left_hull_flat_past_the_least_jct_and_nan_below_the_sweep():
    # budget=0.6 (90 kg, 5 h) is dominated by budget=0.8 (80 kg, 3 h): the hull is 80 kg -> 100 kg
    assert frontier_hull(GREENFLOW, "carbon_kg") == [(80.0, 3 * 3600.0), (100.0, 2 * 3600.0)]
    assert interpolated_at(GREENFLOW, "carbon_kg", 95.0) == 2.25 * 3600  # measured-only: 3 h (above)
    assert interpolated_at(GREENFLOW, "carbon_kg", 80.0) == 3 * 3600
    assert interpolated_at(GREENFLOW, "carbon_kg", 150.0) == 2 * 3600
    assert interpolated_at(GREENFLOW, "energy_kwh", 900.0) == 2.5 * 3600
    assert math.isnan(interpolated_at(GREENFLOW, "carbon_kg", 79.0))


def test_a_pareto_point_above_the_chord_of_its_neighbours_is_not_a_hull_vertex():
    concave = pts(("a", 10.0, 0.0), ("b", 9.0, 1.0), ("c", 4.0, 2.0))
    assert frontier_hull(concave, "carbon_kg") == [(0.0, 10 * 3600.0), (2.0, 4 * 3600.0)]
    assert interpolated_at(concave, "carbon_kg", 1.0) == 7 * 3600  # the mix of a and c beats measured b (9 h)


def test_a_run_that_left_jobs_unfinished_never_counts_as_better():
    unfinished = GREENFLOW + pts(("budget=0.7", 1.0, 70.0), finished=9)
    assert best_at(unfinished, "carbon_kg", 95.0) == 3.0 * 3600
    assert frontier_hull(unfinished, "carbon_kg") == frontier_hull(GREENFLOW, "carbon_kg")
    v = versus_best(GREENFLOW, {"zeus": pts(("eta=1", 2.5, 85.0), finished=9) + pts(("eta=0.5", 4.0, 100.0))},
                    "carbon_kg", interpolated_at)
    assert (v.speedup, v.against, v.incomplete) == (2.0, "zeus eta=0.5", ["zeus eta=1"])


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
    interpolated = versus_best(GREENFLOW, baselines, "carbon_kg", interpolated_at)
    assert interpolated.speedup == 1.25 and interpolated.against == "window+cap flex=0h"  # 100 kg is a vertex


FIFO_RUN = RunResult("fifo", {"avg_jct_s": 4 * 3600.0, "energy_kwh": 1200.0, "carbon_kg": 120.0}, None, 1, 0.1)


def test_the_bench_report_and_json_say_not_reached_instead_of_nan():
    result = BenchResult(runs={"fifo": FIFO_RUN}, frontier={"greenflow": GREENFLOW},
                         lower_bound=LowerBound(60.0, np.array([60.0])),
                         equal_carbon={"fifo": 2.0, "window+cap": float("nan")}, equal_energy={"zeus": float("nan")})
    lines = _speedup_lines(result)
    assert not any("nan" in line.lower() for line in lines)
    assert "window+cap JCT / GreenFlow JCT = not reached" in lines[1]
    assert "PowerFlow at zeus's energy" in lines[2] and "not reached" in lines[2]
    data = json.loads(json.dumps(result.to_dict()), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert data["greenflow_jct_speedup_at_equal_carbon"] == {"fifo": 2.0, "window+cap": None}
    assert data["powerflow_jct_speedup_at_equal_energy"] == {"zeus": None}


def test_the_json_records_each_points_finished_jobs_and_both_readings_of_vs_best():
    frontier = {"greenflow": GREENFLOW + pts(("budget=0.7", 1.0, 70.0), finished=9),
                "fifo": pts(("default", 4.0, 95.0))}
    bound = LowerBound(60.0, 600.0, 86400.0)
    data = BenchResult(runs={"fifo": FIFO_RUN}, frontier=frontier, lower_bound=bound).to_dict()
    assert [(p["setting"], p["finished"], p["jobs"], p["complete"]) for p in data["frontier"]["greenflow"]][-1] == \
        ("budget=0.7", 9, 10, False)
    assert data["incomplete_points"] == ["greenflow budget=0.7"]
    versus = data["greenflow_vs_best_carbon"]
    assert versus["measured"]["speedup"] == pytest.approx(4 / 3) and versus["interpolated"]["speedup"] == 4 / 2.25
