"""GreenFlow with a site's placement weights (``[policy] placement``) against its network placement.

Each cell is a generated workload (``robustness.generate``: a resampled window of a shared
trace on a cluster cut to a quarter of its GPUs, arrivals scaled to an offered load),
replayed against one region's 2023 carbon through the real controller, once per weight
set: ``network`` (the default: the fullest node with a fitting block for one-node jobs,
network packing for the rest) and the scoring framework's sets (``placement/scorer.py``,
``SCORERS`` but ``random``). Only one-node jobs are placed by the weights. Printed per
cell, each set over ``network``: average JCT, total energy (jobs plus idle GPUs), the idle
energy on nodes with something allocated (what a site whose Slurm suspended idle nodes at
once, with no wake-up, would still draw: PWR's yardstick), and the time-weighted
fragmentation (free GPUs on partly used nodes). With ``--suspend-after MIN`` the cluster
runs Slurm's power saving (``sim/power_saving.py``: nodes idle that long are suspended, a job
landing on one waits 5 minutes), so the total energy is what such a site draws, and the
resumes (jobs that waited for a node) are printed as a fifth ratio.

Usage: python benchmarks/greenflow_placement.py [--traces ...] [--loads 0.6,1,3] [--seeds 2]
       [--region DE-LU] [--jobs 200] [--suspend-after 30] [--json out/greenflow_placement.json]
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.progress import track
from rich.table import Table
from robustness import CARBON_TAIL_S, generate, spread, write_rows

from slurm_green.models.registry import default_registry
from slurm_green.policy.placement.scorer import SCORERS
from slurm_green.sim.bench import make_policy
from slurm_green.sim.carbon import replayed_signal
from slurm_green.sim.runner import simulate

TRACES = ("gavel_philly_ee9e8c_seed0.trace", "philly_pollux_jobs.csv", "pollux_workloads/workload-2.csv")
WEIGHTS: dict[str, dict[str, float]] = {"network": {}, **{k: v for k, v in SCORERS.items() if k != "random"}}
RATIOS = (("JCT", "avg_jct_s"), ("energy", "total_energy_kwh"), ("idle awake", "idle_awake_energy_kwh"),
          ("fragmentation", "fragmentation"))


def run_cell(trace: str, seed: int, load: float, region: str, jobs: int,
             suspend_after_s: float | None = None) -> dict[str, object]:
    models = default_registry()
    workload, spec = generate(trace, seed, load, jobs, models)
    spec = replace(spec, suspend_after_s=suspend_after_s)
    signal = replayed_signal(region, float(workload.submit[0]) - 3600.0, float(workload.submit[-1]) + CARBON_TAIL_S)
    runs = {name: simulate(workload, spec, make_policy("greenflow", placement=tuple(weights.items())), signal,
                           models, region).summary
            for name, weights in WEIGHTS.items()}
    return {"trace": trace, "seed": seed, "load": load, "region": region, "cluster": f"{spec.nodes}x{spec.gpus_per_node}",
            "runs": runs}


def _ratio(row: dict[str, object], name: str, key: str) -> float:
    runs = row["runs"]
    assert isinstance(runs, dict)
    base = runs["network"][key]
    return runs[name][key] / base if base else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=",".join(TRACES), help="comma list under job_traces/")
    parser.add_argument("--loads", default="0.6,1,3")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--region", default="DE-LU")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--suspend-after", type=float, default=None,
                        help="minutes idle before Slurm suspends a node (default: no power saving)")
    parser.add_argument("--json", type=Path, help="write every run's summary here")
    args = parser.parse_args()
    suspend_s = None if args.suspend_after is None else args.suspend_after * 60.0
    ratios = RATIOS + ((("resumes", "resumes"),) if suspend_s is not None else ())
    logging.getLogger("slurm_green").setLevel(logging.ERROR)
    cells = [(t, s, float(load)) for t in args.traces.split(",") for s in range(args.seeds)
             for load in args.loads.split(",")]
    began = time.perf_counter()
    rows = [run_cell(trace, seed, load, args.region, args.jobs, suspend_s)
            for trace, seed, load in track(cells, description="cells")]
    console = Console()
    saving = "" if suspend_s is None else f", power saving after {args.suspend_after:g} min"
    labels = ", ".join(label for label, _ in ratios)
    table = Table(title=f"GreenFlow placement / network placement ({args.region}{saving}; {labels})")
    for column in ("workload", "seed", "load", *[n for n in WEIGHTS if n != "network"]):
        table.add_column(column, justify="left" if column == "workload" else "right")
    for r in rows:
        cells_text = [" ".join(f"{_ratio(r, name, key):.3f}" for _, key in ratios) for name in WEIGHTS if name != "network"]
        table.add_row(Path(str(r["trace"])).stem, str(r["seed"]), f"{r['load']:g}", *cells_text)
    console.print(table)
    for name in WEIGHTS:
        if name == "network":
            continue
        console.print(f"{name}: " + "; ".join(f"{label} x {spread([_ratio(r, name, key) for r in rows])}"
                                             for label, key in ratios) + " (min / median / max)")
    console.print(f"{len(rows) * len(WEIGHTS)} runs in {time.perf_counter() - began:.0f} s")
    write_rows(args.json, rows)


if __name__ == "__main__":
    main()
