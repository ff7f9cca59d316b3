"""Every policy on several shared traces x carbon regions: one table, one frontier plot per cell.

For each trace x region this runs ``slurm-green bench`` (every policy at its default
setting plus its knob's sweep) and reports the average JCT and carbon of each policy,
GreenFlow's JCT speed-up over the strongest baseline point it can match at equal-or-less
carbon, PowerFlow's at equal-or-less energy (see ``BenchResult.versus_best``), the
baseline points neither reaches, and GreenFlow's carbon over the oracle lower bound.

Usage: python benchmarks/policy_comparison.py [--traces pollux_workloads/workload-1.csv,gavel_philly_ee9e8c_seed0.trace:500]
       [--regions DE-LU,GB,US-CAL-CISO] [--out out/bench]
A trace is a path (relative ones are under the shared data's job_traces/), optionally
``:N`` for its first N jobs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from slurm_green.carbon.datasets import shared_data_dir
from slurm_green.cli.sim import _cluster, _load, _models, _options, _signal
from slurm_green.cli.plots import frontier_figure, save
from slurm_green.sim.bench import BASELINES, POLICY_NAMES, BenchResult, run_bench, settings_of, speedup_text
from slurm_green.sim.engine import TraceOptions

DEFAULT_TRACES = "pollux_workloads/workload-1.csv,gavel_philly_ee9e8c_seed0.trace:500"


def parse_trace(item: str) -> tuple[Path, int | None]:
    path, _, limit = item.partition(":")
    full = Path(path) if Path(path).is_absolute() else shared_data_dir() / "job_traces" / path
    return full, int(limit) if limit else None


def cell(result: BenchResult) -> dict[str, object]:
    gf = result.versus_best("greenflow", "carbon_kg")
    pf = result.versus_best("powerflow", "energy_kwh")
    lb = result.lower_bound.carbon_kg
    return {
        "policies": {k: {"avg_jct_h": r.summary["avg_jct_s"] / 3600, "carbon_kg": r.summary["carbon_kg"],
                         "energy_kwh": r.summary["energy_kwh"]} for k, r in result.runs.items()},
        "greenflow_vs_best": {"speedup": speedup_text(gf.speedup), "against": gf.against, "not_reached": gf.not_reached},
        "powerflow_vs_best": {"speedup": speedup_text(pf.speedup), "against": pf.against, "not_reached": pf.not_reached},
        # on the policy's interpolated frontier: an estimate beside the measured figure (sim.bench.interpolated_at)
        "greenflow_vs_best_interpolated": speedup_text(result.versus_best("greenflow", "carbon_kg", True).speedup),
        "powerflow_vs_best_interpolated": speedup_text(result.versus_best("powerflow", "energy_kwh", True).speedup),
        "greenflow_vs_default_baselines": {k: speedup_text(v) for k, v in result.equal_carbon.items()},
        "powerflow_vs_default_baselines": {k: speedup_text(v) for k, v in result.equal_energy.items()},
        "lower_bound_carbon_kg": lb,
        "greenflow_carbon_over_lb": result.runs["greenflow"].summary["carbon_kg"] / lb,
        "greenflow_lowest_carbon_over_lb": min(p.carbon_kg for p in result.frontier["greenflow"]) / lb,
        "frontier": {k: [p.__dict__ for p in v] for k, v in result.frontier.items()},
    }


def table(rows: list[tuple[str, str, dict]]) -> Table:
    t = Table(title="avg JCT h / carbon kg at each policy's default; speed-ups at equal-or-less carbon (energy)")
    for col in ("trace", "region", *POLICY_NAMES, "GF vs best\n(@<= carbon)", "PF vs best\n(@<= energy)",
                "GF C/LB\n(b=1, lowest)"):
        t.add_column(col, justify="right")
    for trace, region, c in rows:
        pol = c["policies"]
        gf, pf = c["greenflow_vs_best"], c["powerflow_vs_best"]
        t.add_row(trace, region, *(f"{pol[p]['avg_jct_h']:.2f}\n{pol[p]['carbon_kg']:,.1f}" for p in POLICY_NAMES),
                  f"{gf['speedup']} (interp. {c['greenflow_vs_best_interpolated']})\n{gf['against']}",
                  f"{pf['speedup']} (interp. {c['powerflow_vs_best_interpolated']})\n{pf['against']}",
                  f"{c['greenflow_carbon_over_lb']:.2f}, {c['greenflow_lowest_carbon_over_lb']:.2f}")
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=DEFAULT_TRACES, help="comma list of PATH[:N] (default: %(default)s)")
    parser.add_argument("--regions", default="DE-LU,GB,US-CAL-CISO")
    parser.add_argument("--out", default="out/bench", help="directory for the frontier PNGs and results.json")
    parser.add_argument("--flex", type=float, default=24.0, help="hours of start flexibility every job grants")
    parser.add_argument("--gpu-range", type=float, default=2.0)
    args = parser.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    options = _options(args.flex, args.gpu_range, 300.0, 900.0)  # the simulator's default ticks
    traces = [parse_trace(t) for t in args.traces.split(",")]
    regions = args.regions.split(",")
    runs_per_bench = sum(len(settings_of(p, TraceOptions())) for p in POLICY_NAMES)
    console, models = Console(width=200), _models()
    rows, results, began = [], {}, time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("loading", total=len(traces) * len(regions) * runs_per_bench)
        for path, limit in traces:
            workload = _load(str(path), limit)
            spec = _cluster(workload, None, None)
            name = f"{workload.name}" + (f"[:{limit}]" if limit else "")
            for region in regions:
                signal = _signal(region, workload)
                result = run_bench(workload, spec, signal, models, region, options, on_run=lambda what: progress.update(
                    task, description=f"{name} {region}: {what}", advance=1))
                save(frontier_figure(result, f"{name} ({len(workload)} jobs), {spec.nodes}x{spec.gpus_per_node} GPUs, "
                                             f"{region}"), out_dir / f"{name.replace('/', '_')}_{region}.png")
                c = cell(result)
                rows.append((f"{name}\n{len(workload)} jobs", region, c))
                results[f"{name} {region}"] = {"jobs": len(workload), "cluster": spec.__dict__, **c}
    console.print(table(rows))
    for trace, region, c in rows:
        for who in ("greenflow", "powerflow"):
            missed = c[f"{who}_vs_best"]["not_reached"]
            if missed:
                console.print(f"{trace.splitlines()[0]} {region}: {who} never as low as {', '.join(missed)}")
    console.print(f"{time.perf_counter() - began:.0f} s; PNGs and results.json in {out_dir}/; "
                  f"baselines: {', '.join(BASELINES)}")
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
