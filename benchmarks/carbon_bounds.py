"""Every policy's carbon against both carbon lower bounds.

Per trace x region: the capacity-blind bound (``policy/lower_bound.py``; its wall time), the
capacity-aware LP bound (``policy/lp_bound.py``; its size and wall time, or why it refused),
and each registry policy
at its defaults (plus Zeus at eta 1, the lowest-carbon baseline) simulated as
``benchmarks/policy_comparison.py`` does. Every policy's carbon must be at least both
bounds, and every job's at least its own capacity-blind bound: anything below is a bug and
is printed as one.

Usage: python benchmarks/carbon_bounds.py [--traces gavel_philly_ee9e8c_seed0.trace:300,pollux_workloads/workload-1.csv]
       [--regions DE-LU,GB] [--quick] [--json OUT]
A trace is a path (relative ones are under the shared data's job_traces/), optionally ``:N``
for its first N jobs (the LP refuses more than about 300 Gavel jobs at its default size).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
from rich.console import Console
from rich.table import Table

from slurm_green.carbon.signal import CarbonSignal
from slurm_green.cli.sim import _cluster, _load, _models, _options, _signal
from slurm_green.policy.lower_bound import carbon_lower_bound
from slurm_green.policy.lp_bound import LpTooLarge, lp_lower_bound
from slurm_green.policy.registry import POLICY_NAMES, PolicyKnobs, make_policy
from slurm_green.sim.bounds import bound_inputs
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.runner import simulate
from slurm_green.sim.workload import Workload

from policy_comparison import parse_trace

DEFAULT_TRACES = "gavel_philly_ee9e8c_seed0.trace:300,pollux_workloads/workload-1.csv"
QUICK_TRACES = "gavel_philly_ee9e8c_seed0.trace:60,pollux_workloads/workload-1.csv:60"
#: Registry policies at their defaults, and Zeus at eta 1 (energy only): the lowest-carbon baseline.
RUNS: dict[str, PolicyKnobs] = {**{name: PolicyKnobs(name=name) for name in POLICY_NAMES},
                                "zeus eta=1": PolicyKnobs(name="zeus", eta=1.0)}
REPO = Path(__file__).resolve().parents[1]


def cell(workload: Workload, region: str, options: TraceOptions, console: Console) -> dict[str, Any]:
    spec, models = _cluster(workload, None, None), _models()
    signal = cast(CarbonSignal, _signal(region, workload))  # the CLI's helper is typed loosely
    jobs, shape = bound_inputs(workload, spec, models, options)
    began = time.perf_counter()
    blind = carbon_lower_bound(jobs, signal, models, shape)
    blind_s = time.perf_counter() - began
    began = time.perf_counter()
    try:
        lp = lp_lower_bound(jobs, signal, models, shape)
        lp_kg, lp_note = lp.carbon_kg, f"{lp.variables:,} variables, {lp.slots} slots"
    except LpTooLarge as exc:
        lp_kg, lp_note = float("nan"), f"refused: {exc}"
    lp_s = time.perf_counter() - began
    policies: dict[str, dict[str, float]] = {}
    out: dict[str, Any] = {
        "jobs": len(workload), "blind_kg": blind.carbon_kg, "blind_s": blind_s, "lp_kg": lp_kg, "lp_s": lp_s,
        "lp": lp_note, "policies": policies}
    for label, knobs in RUNS.items():
        run = simulate(workload, spec, make_policy(knobs), signal, models, region, options)
        per_job = run.record.energy_j / 3.6e6 * run.record.intensity / 1000.0
        below = int((per_job < blind.per_job_kg * (1 - 1e-9)).sum())
        policies[label] = {"carbon_kg": run.summary["carbon_kg"], "finished": run.summary["finished"],
                                  "jobs_below_own_bound": below}
        kg = run.summary["carbon_kg"]
        if below or kg < blind.carbon_kg * (1 - 1e-9) or kg < lp_kg * (1 - 1e-9):
            console.print(f"[bold red]BUG: {label} on {workload.name} {region} emits {kg:,.2f} kg, below a bound "
                          f"(capacity-blind {blind.carbon_kg:,.2f}, LP {lp_kg:,.2f}); {below} job(s) below "
                          "their own bound[/bold red]")
    return out


def table(rows: list[tuple[str, str, dict[str, Any]]]) -> Table:
    t = Table(title="carbon kg (jobs' energy); x = policy / max(capacity-blind, LP) bound")
    for col in ("trace", "region", "capacity-blind\n(wall s)", "LP\n(wall s)", *RUNS):
        t.add_column(col, justify="right")
    for trace, region, c in rows:
        best = np.nanmax([c["blind_kg"], c["lp_kg"]])
        t.add_row(trace, region, f"{c['blind_kg']:,.2f}\n({c['blind_s']:.1f})", f"{c['lp_kg']:,.2f}\n({c['lp_s']:.1f})",
                  *(f"{p['carbon_kg']:,.2f}\nx{p['carbon_kg'] / best:.2f}" for p in c["policies"].values()))
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=DEFAULT_TRACES, help="comma list of PATH[:N] (default: %(default)s)")
    parser.add_argument("--regions", default="DE-LU,GB")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TRACES}, DE-LU only")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args()
    traces, regions = (QUICK_TRACES, "DE-LU") if args.quick else (args.traces, args.regions)
    options = _options(24.0, 2.0, 300.0, 900.0)
    console, rows, began = Console(width=220), [], time.perf_counter()
    for item in traces.split(","):
        path, limit = parse_trace(item)
        workload = _load(str(path), limit)
        name = workload.name + (f"[:{limit}]" if limit else "")
        for region in regions.split(","):
            rows.append((f"{name}\n{len(workload)} jobs", region, cell(workload, region, options, console)))
    console.print(table(rows))
    for trace, region, c in rows:
        console.print(f"{trace.splitlines()[0]} {region}: LP {c['lp']}; jobs below their own capacity-blind bound: "
                      + ", ".join(f"{k} {v['jobs_below_own_bound']}" for k, v in c["policies"].items()))
    console.print(f"{time.perf_counter() - began:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({f"{t.splitlines()[0]} {r}": c for t, r, c in rows}, indent=2))


if __name__ == "__main__":
    main()
