"""What layer freezing (IceFrog) buys, in simulation: the training side and the scheduler's.

Each cell is a generated workload (``robustness.generate``: a resampled window of a shared
trace on a cluster cut to a quarter of its GPUs, arrivals scaled to an offered load)
replayed against one region's 2023 carbon. A share of the jobs (``--freeze``) trains with
the helper's layer freezing: a quarter of its blocks freeze after a quarter of its work,
half after half (``TraceOptions.freeze_steps``, a choice, not a fit), and it then runs at
the freezing model's effective rate (the compute its frozen blocks skip, synchronisation
unchanged, times the frozen penalty on statistical progress; ``models/freezing.py``). A
share (``--elastic``) also opts in to checkpoint-and-requeue. Six runs per cell, each
through the real controller:

* ``fifo``: plain Slurm order, no job freezes (the reference);
* ``fifo+freeze``: the same with the freezing jobs freezing: what the training helper
  alone buys, with no scheduler that knows;
* ``greenflow``, ``greenflow+freeze``: GreenFlow at budget 1 without and with freezing;
* ``greenflow+resize``: GreenFlow that also grows running elastic jobs into idle GPUs and
  shrinks one for the queue's blocked head (``[elastic] requeue`` and ``shrink``), with
  freezing, rating each job as if nothing were frozen (layer-blind);
* ``icefrog``: the same resizes rating each job by its effective progress at the frozen
  share its helper reports (``policy/running.py``).

Printed per cell: each run's average JCT, energy and carbon (with idle power) over
``fifo``'s, and the two resizing runs' restarts; then ``icefrog`` against
``greenflow+freeze`` (what the resizes buy) and against ``greenflow+resize`` (what
layer-awareness alone buys).

Usage: python benchmarks/layer_freezing.py [--traces ...] [--loads 0.3,1,3] [--seeds 1]
       [--region DE-LU] [--jobs 200] [--freeze 1.0] [--elastic 1.0] [--penalty 0.5]
       [--json out/layer_freezing.json]
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
from slurm_green.models.freezing import DEFAULT_PENALTY
from slurm_green.models.registry import default_registry
from slurm_green.policy.running import resizes_running, resizing
from slurm_green.sim.bench import make_policy
from slurm_green.sim.carbon import replayed_signal
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.runner import simulate

TRACES = ("pollux_workloads/workload-2.csv", "gavel_philly_ee9e8c_seed0.trace", "philly_pollux_jobs.csv")
#: (label, policy, jobs freeze): the runs of a cell, ``fifo`` first (the reference).
RUNS = (("fifo", "fifo", False), ("fifo+freeze", "fifo", True), ("greenflow", "greenflow", False),
        ("greenflow+freeze", "greenflow", True), ("greenflow+resize", "greenflow", True), ("icefrog", "icefrog", True))
#: The controller's defaults (``[elastic]``) but for the cool-down, which a 200-job window would rarely pass.
RESIZE = ResizeSettings(min_interval_s=3600.0)


def run_cell(trace: str, seed: int, load: float, region: str, jobs: int, freeze: float,
             elastic: float, penalty: float) -> dict[str, object]:
    models = default_registry()
    workload, spec = generate(trace, seed, load, jobs, models)
    signal = replayed_signal(region, float(workload.submit[0]) - 3600.0, float(workload.submit[-1]) + CARBON_TAIL_S)
    runs = {}
    for label, name, freezing in RUNS:
        options = replace(TraceOptions(), accept_requeue=elastic, accept_freeze=freeze if freezing else 0.0,
                          freeze_penalty=penalty)
        policy = make_policy(name)
        if label == "greenflow+resize":  # icefrog's resizes, blind to the frozen shares
            policy = resizing(policy, shrink=True, layer_aware=False)
        resize = RESIZE if resizes_running(policy) else None
        runs[label] = simulate(workload, spec, policy, signal, models, region, options, resize=resize).summary
    ref = runs["fifo"]
    return {"trace": trace, "seed": seed, "load": load, "region": region, "cluster": f"{spec.nodes}x{spec.gpus_per_node}",
            "runs": runs,
            "jct": {k: s["avg_jct_s"] / ref["avg_jct_s"] for k, s in runs.items()},
            "energy": {k: s["energy_kwh"] / ref["energy_kwh"] for k, s in runs.items()},
            "carbon": {k: s["total_carbon_kg"] / ref["total_carbon_kg"] for k, s in runs.items()},
            "restarts": {k: s["restarts"] for k, s in runs.items()},
            "finished": {k: (s["finished"], s["jobs"]) for k, s in runs.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    window_arguments(parser, TRACES)
    parser.add_argument("--freeze", type=float, default=1.0, help="share of jobs that freeze layers")
    parser.add_argument("--penalty", type=float, default=DEFAULT_PENALTY,
                        help="the true frozen-penalty slope (the policies believe the model's default)")
    args = parser.parse_args()
    logging.getLogger("slurm_green").setLevel(logging.ERROR)  # each abandoned resize warns, as on a site
    cells = window_cells(args)
    began = time.perf_counter()
    rows = [run_cell(trace, seed, load, args.region, args.jobs, args.freeze, args.elastic, args.penalty)
            for trace, seed, load in track(cells, description="cells")]
    console = Console()
    labels = [label for label, _, _ in RUNS[1:]]
    table = Table(title=f"over fifo without freezing ({args.freeze:.0%} of jobs freeze at penalty {args.penalty:g}, "
                        f"{args.elastic:.0%} elastic, "
                        f"{args.region}; < 1: better): average JCT / energy / carbon with idle power")
    for column in ("workload", "seed", "load", *labels, "restarts (blind / aware)"):
        table.add_column(column, justify="left" if column == "workload" else "right")
    for r in rows:
        cells_ = [f"{r['jct'][k]:.3f} / {r['energy'][k]:.3f} / {r['carbon'][k]:.3f}" for k in labels]
        restarts = r["restarts"]
        table.add_row(Path(str(r["trace"])).stem, str(r["seed"]), f"{r['load']:g}", *cells_,
                      f"{restarts['greenflow+resize']} / {restarts['icefrog']}")
    console.print(table)
    for label in labels:
        console.print(f"{label}: JCT / fifo min / median / max {spread([r['jct'][label] for r in rows])}; energy "
                      f"median {statistics.median(r['energy'][label] for r in rows):.3f}; carbon median "
                      f"{statistics.median(r['carbon'][label] for r in rows):.3f}")
    for other, what in (("greenflow+freeze", "the resizes and their layer-awareness"),
                        ("greenflow+resize", "layer-awareness alone")):
        versus = [r["jct"]["icefrog"] / r["jct"][other] for r in rows]
        console.print(f"icefrog / {other} JCT ({what}): min / median / max {spread(versus)}")
    unfinished = [f"{Path(str(r['trace'])).stem} seed {r['seed']} load {r['load']:g}, {k}: {done} of {n} finished"
                  for r in rows for k, (done, n) in r["finished"].items() if done < n]
    if unfinished:
        console.print("runs that left jobs unfinished:", *unfinished, sep="\n  ")
    console.print(f"{len(rows) * len(RUNS)} runs in {time.perf_counter() - began:.0f} s")
    write_rows(args.json, rows)


if __name__ == "__main__":
    main()
