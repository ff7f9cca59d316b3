"""GreenFlow against FIFO and every baseline on many generated workloads: the distribution, not one cell.

A policy tuned on a handful of cells can lose badly on the next one; what an admin needs
is the worst case. Each generated workload is a window of a shared trace with its jobs
redrawn (``Workload.resampled``, one per seed), on the trace's default cluster cut to
hold about a quarter of the window's requested GPUs at once (``cluster_for``: a
200-job window of Philly's mostly 1-GPU jobs never queues on 768 GPUs), its arrivals
compressed or stretched to an offered load (``offered_load``: requested GPU-time over
the cluster's GPU-time while jobs arrive), and replayed against the 2023 carbon of
each region. Per workload it runs FIFO, GreenFlow at budgets 1 ... 0.6 and each
baseline along its knob (window and window+cap flexibility 0/6/24 h, Zeus eta 0/0.5/1),
and prints, as min / median / max over the workloads:

- **FIFO JCT / GreenFlow JCT at budget 1** (>= 1: GreenFlow no slower than plain Slurm;
  the minimum is the figure that matters), and GreenFlow's carbon over FIFO's there;
- **the noise floor**: FIFO's JCT over FIFO's on the same workload with every job 1 % longer
  or shorter at random (``jittered``). A queue is chaotic: which large job starts first, or
  what backfill slips in ahead of it, moves a 200-job average by tens of percent, so a
  ratio below 1 in one cell is only evidence of harm where it is below this spread;
- **at 0.8 of FIFO's carbon**: each baseline's best JCT among its settings using at most
  that carbon over GreenFlow's best JCT among its budgets doing the same (a workload
  where either never gets that low is counted as "not reached", not as a ratio), and
  the same against the best baseline.

With ``--replicas K`` the first figure is also given over K copies of each workload with every
job 1 % longer or shorter at random, both policies on each copy: the ratio of the mean JCTs
is what GreenFlow does to that workload, where one run's ratio is mostly which job happened to
start first.

Usage: python benchmarks/robustness.py [--quick] [--traces ...] [--regions DE-LU,GB,US-CAL-CISO]
       [--seeds 2] [--loads 0.6,1,1.5,3] [--jobs 200] [--processes 1] [--replicas K]
       [--json out/robustness.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from slurm_green.carbon.datasets import shared_data_dir
from slurm_green.core.plan import Policy
from slurm_green.models.registry import default_registry
from slurm_green.sim.bench import BASELINES, Point, best_at, make_policy, offered_load, settings_of
from slurm_green.sim.carbon import replayed_signal
from slurm_green.sim.cluster import ClusterSpec, default_cluster
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.runner import simulate
from slurm_green.sim.traces import load_trace
from slurm_green.sim.workload import Workload

ALL_TRACES = ("pollux_workloads/workload-1.csv", "pollux_workloads/workload-2.csv",
              "pollux_workloads/workload-3.csv", "pollux_workloads/workload-4.csv",
              "gavel_philly_ee9e8c_seed0.trace", "philly_pollux_jobs.csv", "alibaba_openb_pod_list_default.csv")
QUICK_TRACES = ("pollux_workloads/workload-2.csv", "gavel_philly_ee9e8c_seed0.trace")
BUDGETS = (1.0, 0.9, 0.8, 0.7, 0.6)
TIGHT = 0.8  #: the second comparison: at most this fraction of FIFO's carbon
#: Carbon replayed past the last arrival, so that deferred and queued jobs still meet real data.
CARBON_TAIL_S = 60 * 86400.0


@dataclass(frozen=True)
class Cell:
    """One generated workload against one region."""

    trace: str
    seed: int
    load: float
    region: str
    jobs: int
    #: GreenFlow settings overridden for this run (``--set``), e.g. (("runtime_slack", None),).
    greenflow: tuple[tuple[str, float | None], ...] = ()
    #: Only FIFO and GreenFlow at budget 1 (``--budget-one``): the first figure, fast.
    budget_one: bool = False
    #: FIFO and GreenFlow at budget 1 also on this many jittered copies of the workload
    #: (``--replicas``): the first figure as a ratio of mean JCTs, above the noise of one run.
    replicas: int = 0


def cluster_for(workload: Workload) -> ClusterSpec:
    """The trace's default cluster, with at most the nodes that hold a quarter of the jobs' GPUs."""
    spec = default_cluster(workload.name)
    quarter = math.ceil(float(workload.gpus.sum()) / (4 * spec.gpus_per_node))
    return replace(spec, nodes=max(2, min(spec.nodes, quarter)))


def generate(trace: str, seed: int, load: float, jobs: int, models: object) -> tuple[Workload, ClusterSpec]:
    """The trace's window for ``seed``, its cluster, and its arrivals scaled to offered load ``load``."""
    workload = load_trace(shared_data_dir() / "job_traces" / trace).resampled(jobs, seed)
    spec = cluster_for(workload)
    natural = offered_load(workload, spec, models, TraceOptions())
    return workload.arrivals_scaled(load / natural), spec


def jittered(workload: Workload, seed: int, spread: float = 0.01) -> Workload:
    """The same jobs, each ``spread`` longer or shorter at random (uniform), seeded."""
    k = 1.0 + spread * np.random.default_rng(seed).uniform(-1.0, 1.0, len(workload))
    return replace(workload, work=workload.work * k, duration_s=workload.duration_s * k)


def run_cell(cell: Cell) -> dict[str, object]:
    """Every policy and setting on one cell; the summary figures of each run."""
    models = default_registry()
    workload, spec = generate(cell.trace, cell.seed, cell.load, cell.jobs, models)
    signal = replayed_signal(cell.region, float(workload.submit[0]) - 3600.0,
                             float(workload.submit[-1]) + CARBON_TAIL_S)
    options = TraceOptions()
    frontier: dict[str, list[dict[str, float]]] = {}
    #: FIFO and GreenFlow at budget 1 as they ran, and their JCT: what ``--replicas`` runs again.
    reference: dict[str, tuple[Policy, float]] = {}
    others = () if cell.budget_one else tuple(b for b in BASELINES if b != "fifo")
    for name in ("fifo", "greenflow", *others):
        points = []
        for setting, policy, opts in settings_of(name, options, (1.0,) if cell.budget_one else BUDGETS):
            if name == "greenflow":
                policy = replace(policy, **dict(cell.greenflow))
            s = simulate(workload, spec, policy, signal, models, cell.region, opts).summary
            if setting in ("default", "budget=1") and name in ("fifo", "greenflow"):
                reference[name] = (policy, s["avg_jct_s"])
            points.append({"setting": setting, "avg_jct_s": s["avg_jct_s"], "energy_kwh": s["energy_kwh"],
                           "carbon_kg": s["carbon_kg"], "finished": s["finished"], "jobs": s["jobs"]})
        frontier[name] = points
    fifo = frontier["fifo"][0]["avg_jct_s"]
    noise = fifo / simulate(jittered(workload, cell.seed), spec, make_policy("fifo"), signal,
                            models, cell.region, options).summary["avg_jct_s"]
    replicated = {}
    if cell.replicas:
        # The same jobs each +-1 %, seeds apart from the noise floor's; both policies on every
        # copy (common random numbers), so the ratio of the means compares the policies, not
        # which large job one run happened to start first.
        jcts = {name: [jct] for name, (_, jct) in reference.items()}
        for r in range(cell.replicas):
            copy = jittered(workload, 1000 * (cell.seed + 1) + r)
            for name, (policy, _) in reference.items():
                run = simulate(copy, spec, policy, signal, models, cell.region, options)
                jcts[name].append(run.summary["avg_jct_s"])
        replicated = {"replica_jct_s": jcts,
                      "fifo_over_greenflow_at_1_replicated": statistics.fmean(jcts["fifo"])
                      / statistics.fmean(jcts["greenflow"])}
    return {**cell.__dict__, "workload": workload.name, "cluster": f"{spec.nodes}x{spec.gpus_per_node}",
            "frontier": frontier, "fifo_over_jittered_fifo": noise, **figures(frontier), **replicated}


def figures(frontier: dict[str, list[dict[str, float]]]) -> dict[str, object]:
    """FIFO / GreenFlow at budget 1, and each baseline / GreenFlow at 0.8 of FIFO's carbon (None: not reached)."""
    fifo = frontier["fifo"][0]
    at_one = next(p for p in frontier["greenflow"] if p["setting"] == "budget=1")
    cap = TIGHT * fifo["carbon_kg"]
    as_points = {k: [Point(**p) for p in v] for k, v in frontier.items()}
    greenflow = best_at(as_points["greenflow"], "carbon_kg", cap)
    tight: dict[str, float | None] = {}
    for base in BASELINES:
        if base == "fifo" or base not in as_points:
            continue
        jct = best_at(as_points[base], "carbon_kg", cap)
        tight[base] = jct / greenflow if jct == jct and greenflow == greenflow else None  # NaN: not reached
    reached = [best_at(as_points[b], "carbon_kg", cap) for b in tight]
    reached = [j for j in reached if j == j]
    best = min(reached) / greenflow if reached and greenflow == greenflow else None
    all_done = all(p.complete for pts in as_points.values() for p in pts)
    return {"fifo_over_greenflow_at_1": fifo["avg_jct_s"] / at_one["avg_jct_s"],
            "carbon_greenflow_over_fifo_at_1": at_one["carbon_kg"] / fifo["carbon_kg"],
            "greenflow_reaches_tight": greenflow == greenflow,
            "baseline_over_greenflow_at_tight": tight, "best_baseline_over_greenflow_at_tight": best,
            "every_run_finished_every_job": all_done}


def window_arguments(parser: argparse.ArgumentParser, traces: tuple[str, ...]) -> None:
    """The options of a benchmark over generated windows with elastic jobs (elastic_resize.py,
    layer_freezing.py): which windows, and the share of jobs that opt in to requeue."""
    parser.add_argument("--traces", default=",".join(traces), help="comma list under job_traces/")
    parser.add_argument("--loads", default="0.3,1,3", help="offered loads (1: arrivals keep the cluster busy)")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--region", default="DE-LU")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--elastic", type=float, default=1.0, help="share of jobs that opt in to elastic=requeue")
    parser.add_argument("--json", type=Path, help="write every run's summary here")


def window_cells(args: argparse.Namespace) -> list[tuple[str, int, float]]:
    """(trace, seed, load) of every cell ``window_arguments`` asked for."""
    return [(t, s, float(load)) for t in args.traces.split(",") for s in range(args.seeds)
            for load in args.loads.split(",")]


def write_rows(path: Path | None, rows: list) -> None:
    """Every run's summary as JSON at ``path`` (nothing without one)."""
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rows, indent=1, default=float))


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def report(results: list[dict[str, object]], console: Console) -> None:
    t = Table(title=f"{len(results)} generated workload x region cells: min / median / max")
    t.add_column("ratio")
    t.add_column("min / median / max", justify="right")
    t.add_column("cells", justify="right")
    at_one = [r["fifo_over_greenflow_at_1"] for r in results]
    t.add_row("FIFO JCT / GreenFlow JCT, budget 1 (>= 1: GreenFlow no slower)", spread(at_one), str(len(at_one)))
    # Min / median / max hide how often it wins and loses; the geometric mean weighs a 2 x
    # gain and a 2 x loss alike (docs/policies.md, "Fixes tried": variants compared by these).
    t.add_row("  geometric mean; cells > 2 % faster / > 2 % slower than FIFO",
              f"{math.exp(statistics.fmean(math.log(x) for x in at_one)):.3f}",
              f"{sum(x > 1.02 for x in at_one)} / {sum(x < 0.98 for x in at_one)}")
    noise = [r["fifo_over_jittered_fifo"] for r in results]
    t.add_row("noise floor: FIFO JCT / FIFO JCT, every job +-1 % (same cells)", spread(noise), str(len(noise)))
    beyond = sum(g < min(1.0, n) - 0.02 for g, n in zip(at_one, noise))
    t.add_row("cells where GreenFlow at budget 1 is > 2 % below both 1 and that cell's noise ratio", str(beyond),
              str(len(at_one)))
    over_copies = "fifo_over_greenflow_at_1_replicated"
    replicated = [r[over_copies] for r in results if over_copies in r]
    if replicated:
        copies = len(results[0]["replica_jct_s"]["fifo"])
        t.add_row(f"FIFO JCT / GreenFlow JCT, budget 1, mean JCT over the workload and {copies - 1} copies +-1 %",
                  spread(replicated), str(len(replicated)))
        t.add_row("  geometric mean; cells > 2 % faster / > 2 % slower than FIFO",
                  f"{math.exp(statistics.fmean(math.log(x) for x in replicated)):.3f}",
                  f"{sum(x > 1.02 for x in replicated)} / {sum(x < 0.98 for x in replicated)}")
    carbon = [r["carbon_greenflow_over_fifo_at_1"] for r in results]
    t.add_row("GreenFlow carbon / FIFO carbon, budget 1", spread(carbon), str(len(carbon)))
    baselines = sorted({b for r in results for b in r["baseline_over_greenflow_at_tight"]}, key=BASELINES.index)
    for base in baselines + ["best baseline"] if baselines else []:
        key = "best_baseline_over_greenflow_at_tight"
        ratios = [r[key] if base == "best baseline" else r["baseline_over_greenflow_at_tight"].get(base)
                  for r in results]
        got = [x for x in ratios if x is not None]
        t.add_row(f"{base} JCT / GreenFlow JCT, both <= {TIGHT:g} x FIFO carbon", spread(got),
                  f"{len(got)} ({len(ratios) - len(got)} not reached)")
    console.print(t)
    worst = min(results, key=lambda r: r["fifo_over_greenflow_at_1"])
    console.print(f"worst at budget 1: {worst['workload']} load {worst['load']:g} {worst['region']} "
                  f"({worst['fifo_over_greenflow_at_1']:.3f})")
    if replicated:
        worst = min(results, key=lambda r: r[over_copies])
        console.print(f"worst at budget 1, over the copies: {worst['workload']} load {worst['load']:g} "
                      f"{worst['region']} ({worst[over_copies]:.3f})")
    if baselines:
        missing = sum(not r["greenflow_reaches_tight"] for r in results)
        console.print(f"GreenFlow never at or under {TIGHT:g} x FIFO's carbon in {missing} cell(s)")
    unfinished = sum(not r["every_run_finished_every_job"] for r in results)
    console.print(f"cells where some run left jobs unfinished: {unfinished}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 traces, 1 seed, loads 1 and 3, 100 jobs: a few minutes")
    parser.add_argument("--traces", default=",".join(ALL_TRACES), help="comma list under job_traces/")
    parser.add_argument("--regions", default="DE-LU,GB,US-CAL-CISO")
    parser.add_argument("--seeds", type=int, default=2, help="generated workloads per trace and load")
    parser.add_argument("--loads", default="0.6,1,1.5,3", help="offered loads (1: arrivals keep the cluster busy)")
    parser.add_argument("--jobs", type=int, default=200, help="jobs per generated workload")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--set", default="", metavar="KEY=VALUE,...",
                        help="GreenFlow settings for every run, e.g. runtime_slack=none,growth_horizon_s=7200")
    parser.add_argument("--budget-one", action="store_true",
                        help="only FIFO and GreenFlow at budget 1 (the first figure and the noise floor)")
    parser.add_argument("--replicas", type=int, default=0, metavar="K",
                        help="also run FIFO and GreenFlow at budget 1 on K copies of each workload, every job "
                             "+-1 %%, and print the ratio of their mean JCTs (about 1 + 0.7 K times as long)")
    parser.add_argument("--json", default="out/robustness.json", help="every cell's runs and figures")
    args = parser.parse_args()
    traces = QUICK_TRACES if args.quick else tuple(args.traces.split(","))
    seeds = range(1 if args.quick else args.seeds)
    loads = (1.0, 3.0) if args.quick else tuple(float(x) for x in args.loads.split(","))
    jobs = 100 if args.quick else args.jobs
    greenflow = tuple((k, None if v.lower() == "none" else float(v))
                      for k, v in (item.split("=", 1) for item in args.set.split(",") if item))
    cells = [Cell(t, s, load, r, jobs, greenflow, args.budget_one, args.replicas)
             for t in traces for s in seeds for load in loads
             for r in args.regions.split(",")]
    console, began, results = Console(width=160), time.perf_counter(), []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as progress, \
            ProcessPoolExecutor(max_workers=args.processes) as pool:
        task = progress.add_task("workload x region cells", total=len(cells))
        for result in pool.map(run_cell, cells):
            results.append(result)
            progress.update(task, advance=1, description=f"{result['workload']} load {result['load']:g} "
                                                         f"{result['region']}")
    report(results, console)
    console.print(f"{time.perf_counter() - began:.0f} s; {len(cells)} cells; every run in {args.json}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"args": vars(args), "cells": results}, indent=1))


if __name__ == "__main__":
    main()
