"""What growing running elastic jobs (checkpoint, requeue, restart larger) buys, in simulation.

Each cell is a generated workload (``robustness.generate``: a resampled window of a shared
trace on a cluster cut to a quarter of its GPUs, arrivals scaled to an offered load) with
every job opted in to ``elastic=requeue`` (the share is ``--elastic``), replayed against
one region's 2023 carbon. Each policy runs twice through the real controller: as it is,
and wrapped in ``GrowRunning`` with the resizer on (``simulate(resize=...)``: the
simulated helper checkpoints 60 s after SIGUSR2, a requeue loses the work since, Slurm
delays the restart 120 s, reloading costs 60 s; ``TraceOptions``), and a third time
also wrapped in ``ShrinkRunning`` (``[elastic] shrink``). Printed per cell and policy:
average JCT, energy and carbon of the grown run over the plain one (< 1: the resize
helps), how many restarts it made, and the average JCT with shrinking too. Growth only
takes GPUs no pending job waits for, and shrinking only happens for a blocked queue, so
the loads span an idle and a full cluster.

With ``--budget`` below 1 GreenFlow plans under that budget, and runs a fourth time also
wrapped in ``ShrinkWhenDear`` (``[elastic] shrink_when_dear``: shrink a running job when
the budget's price makes its carbon dear): its JCT and carbon over the grown-and-shrunk
run's. Lowering the budget is the other way to trade JCT for carbon, so the printed
frontier slope (hours of average JCT per kg saved, grown-and-shrunk at ``--budget`` vs at
``--lower``) says what a kg cost that way.

Usage: python benchmarks/elastic_resize.py [--traces ...] [--loads 0.3,1,3] [--seeds 1]
       [--region DE-LU] [--jobs 200] [--elastic 1.0] [--budget 1 [--lower 0.7]] [--json out/elastic_resize.json]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.progress import track
from rich.table import Table
from robustness import CARBON_TAIL_S, generate, spread, window_arguments, window_cells, write_rows

from slurm_green.controller.resize import ResizeSettings
from slurm_green.models.registry import default_registry
from slurm_green.policy.running import resizing
from slurm_green.sim.bench import make_policy
from slurm_green.sim.carbon import replayed_signal
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.runner import simulate

TRACES = ("pollux_workloads/workload-2.csv", "gavel_philly_ee9e8c_seed0.trace", "philly_pollux_jobs.csv")
POLICIES = ("fifo", "greenflow")
#: The controller's defaults (``[elastic]``) but for the cool-down, which a 200-job window would rarely pass.
RESIZE = ResizeSettings(min_interval_s=3600.0)


def run_cell(trace: str, seed: int, load: float, region: str, jobs: int, elastic: float, budget: float,
             lower: float) -> list[dict[str, object]]:
    models = default_registry()
    workload, spec = generate(trace, seed, load, jobs, models)
    signal = replayed_signal(region, float(workload.submit[0]) - 3600.0, float(workload.submit[-1]) + CARBON_TAIL_S)
    options = replace(TraceOptions(), accept_requeue=elastic)
    rows = []
    for name in POLICIES:
        policy = make_policy(name, budget if name == "greenflow" else None)
        plain = simulate(workload, spec, policy, signal, models, region, options)
        grown = simulate(workload, spec, resizing(policy), signal, models, region, options, resize=RESIZE)
        both = simulate(workload, spec, resizing(policy, shrink=True), signal, models, region, options,
                        resize=RESIZE)
        p, g, b = plain.summary, grown.summary, both.summary
        dear: dict[str, object] = {}
        if name == "greenflow" and budget < 1:
            d = simulate(workload, spec, resizing(policy, shrink=True, when_dear=True), signal, models, region,
                         options, resize=RESIZE).summary
            tighter = simulate(workload, spec, resizing(make_policy(name, lower), shrink=True), signal, models,
                               region, options, resize=RESIZE).summary
            dear = {"dear": d, "jct_dear": d["avg_jct_s"] / b["avg_jct_s"],
                    "carbon_dear": d["total_carbon_kg"] / b["total_carbon_kg"], "restarts_dear": d["restarts"],
                    "h_per_kg_dear": _slope(b, d), "lower": tighter, "h_per_kg_lower": _slope(b, tighter)}
        rows.append({**dear, "trace": trace, "seed": seed, "load": load, "region": region, "policy": name,
                     "cluster": f"{spec.nodes}x{spec.gpus_per_node}", "plain": p, "grown": g,
                     "jct": g["avg_jct_s"] / p["avg_jct_s"], "energy": g["energy_kwh"] / p["energy_kwh"],
                     "carbon": g["total_carbon_kg"] / p["total_carbon_kg"], "restarts": g["restarts"],
                     "grown_and_shrunk": b, "jct_shrink": b["avg_jct_s"] / p["avg_jct_s"], "restarts_shrink": b["restarts"],
                     "utilisation": (p["gpu_utilisation"], g["gpu_utilisation"]),
                     "finished": (p["finished"], g["finished"], p["jobs"]),
                     "wall_s": (plain.wall_s, grown.wall_s, both.wall_s)})
    return rows


def _slope(base: dict[str, float], other: dict[str, float]) -> float:
    """Hours of average JCT added per kg of carbon saved going from ``base`` to ``other`` (nan if
    it saved none)."""
    saved = base["total_carbon_kg"] - other["total_carbon_kg"]
    return (other["avg_jct_s"] - base["avg_jct_s"]) / 3600.0 / saved if saved > 0 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    window_arguments(parser, TRACES)
    parser.add_argument("--budget", type=float, default=1.0, help="GreenFlow's budget fraction (below 1: also "
                                                                   "the shrink-when-dear run)")
    parser.add_argument("--lower", type=float, default=0.7, help="the lower budget the frontier slope is read at")
    args = parser.parse_args()
    logging.getLogger("slurm_green").setLevel(logging.ERROR)  # each abandoned resize warns, as on a site
    cells = window_cells(args)
    began = time.perf_counter()
    rows = [row for trace, seed, load in track(cells, description="cells")
            for row in run_cell(trace, seed, load, args.region, args.jobs, args.elastic, args.budget, args.lower)]
    console = Console()
    table = Table(title=f"grown / plain ({args.elastic:.0%} of jobs elastic, {args.region}; < 1: the resize helps)")
    for column in ("workload", "seed", "load", "policy", "JCT", "energy", "carbon (with idle)", "restarts",
                   "utilisation plain -> grown", "finished", "JCT +shrink", "restarts +shrink"):
        table.add_column(column, justify="left" if column in ("workload", "policy") else "right")
    for r in rows:
        done = r["finished"]
        table.add_row(Path(str(r["trace"])).stem, str(r["seed"]), f"{r['load']:g}", str(r["policy"]), f"{r['jct']:.3f}",
                      f"{r['energy']:.3f}", f"{r['carbon']:.3f}", str(r["restarts"]),
                      f"{r['utilisation'][0]:.2f} -> {r['utilisation'][1]:.2f}", f"{done[0]}/{done[1]} of {done[2]}",
                      f"{r['jct_shrink']:.3f}", str(r["restarts_shrink"]))
    console.print(table)
    for name in POLICIES:
        mine = [r for r in rows if r["policy"] == name]
        console.print(f"{name}: grown/plain JCT min / median / max {spread([r['jct'] for r in mine])}; energy median "
                      f"{statistics.median(r['energy'] for r in mine):.3f}; restarts {sum(r['restarts'] for r in mine)}; "
                      f"with shrinking {spread([r['jct_shrink'] for r in mine])}, "
                      f"restarts {sum(r['restarts_shrink'] for r in mine)}")
    dear = [r for r in rows if "dear" in r]
    if dear:
        table = Table(title=f"greenflow at budget {args.budget:g}: shrinking when carbon is dear, over grown and "
                            f"shrunk (h/kg: hours of average JCT per kg saved; the budget's own at {args.lower:g})")
        for column in ("workload", "seed", "load", "JCT", "carbon (with idle)", "restarts", "h/kg", "h/kg budget"):
            table.add_column(column, justify="left" if column == "workload" else "right")
        for r in dear:
            table.add_row(Path(str(r["trace"])).stem, str(r["seed"]), f"{r['load']:g}", f"{r['jct_dear']:.3f}",
                          f"{r['carbon_dear']:.3f}", f"{r['restarts_shrink']} -> {r['restarts_dear']}",
                          f"{r['h_per_kg_dear']:.3g}", f"{r['h_per_kg_lower']:.3g}")
        console.print(table)
        console.print(f"shrinking when dear: JCT x {spread([r['jct_dear'] for r in dear])}, carbon x "
                      f"{spread([r['carbon_dear'] for r in dear])} (min / median / max)")
    runs = sum(3 + 2 * ("dear" in r) for r in rows)
    console.print(f"{runs} runs in {time.perf_counter() - began:.0f} s")
    write_rows(args.json, rows)


if __name__ == "__main__":
    main()
