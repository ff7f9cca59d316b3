"""EaCO against FIFO and GreenFlow: energy, carbon, average JCT and GPU use, one table.

For each trace x carbon region: FIFO, GreenFlow (budget 1, no co-location), and at each share
of jobs whose users allow a shared GPU EaCO (slowdown bound 1.25, two jobs per GPU) and
GreenFlow with co-location priced in its cost (`policy/priced_sharing.py`; a
trace job carries no options: ``--shares``, each job drawn at random with a
fixed seed). Energy and carbon are the **totals**: the jobs' GPU energy plus every
unallocated GPU's idle power from the first arrival to the last end (the simulator's
``total_energy_kwh``, the same accounting for every policy), so a GPU that co-location
leaves free counts at its idle power. Ratios are to FIFO of the same cell.

Usage: python benchmarks/colocation.py [--traces gavel_philly_ee9e8c_seed0.trace,pollux_workloads/workload-1.csv]
       [--regions DE-LU,GB,US-CAL-CISO] [--shares 0.5,1] [--gpu h100 --mechanism mps] [--max-gpus 16] [--budget 1]
       [--suspend-after MIN] [--json OUT]
A trace is a path (relative ones are under the shared data's job_traces/), optionally ``:N`` for its first N jobs.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from policy_comparison import parse_trace  # benchmarks/ is the script's folder: on sys.path
from rich.console import Console
from rich.table import Table

from slurm_green.cli.sim import _signal
from slurm_green.models.registry import default_registry
from slurm_green.policy.baselines import FifoPolicy
from slurm_green.policy.eaco import EaCoPolicy
from slurm_green.policy.greenflow import GreenFlowPolicy
from slurm_green.policy.priced_sharing import Colocation
from slurm_green.sim.cluster import default_cluster
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.runner import simulate
from slurm_green.sim.traces import load_trace

DEFAULT_TRACES = "gavel_philly_ee9e8c_seed0.trace,pollux_workloads/workload-1.csv"
KEYS = ("avg_jct_s", "total_energy_kwh", "total_carbon_kg", "energy_kwh", "idle_energy_kwh", "gpu_utilisation",
        "shared_share", "mean_power_w", "finished", "jobs")


def run_cell(trace: str, region: str, shares: list[float], gpu: str | None, mechanism: str,
             max_gpus: int, budget: float = 1.0, suspend_after_s: float | None = None) -> list[dict[str, object]]:
    path, limit = parse_trace(trace)
    workload = load_trace(path)
    workload = workload.head(limit) if limit else workload
    models = default_registry(gpu)
    spec = default_cluster(workload.name)
    idle_w = models.type_params(gpu)[0].gpu.idle_w if gpu else spec.idle_w_per_gpu  # the type's own idle power
    spec = replace(spec, gpu_type=gpu or spec.gpu_type, share_mechanism=mechanism, idle_w_per_gpu=idle_w,
                   suspend_after_s=suspend_after_s)
    signal = _signal(region, workload)
    runs = [("fifo", FifoPolicy(), 0.0), (f"greenflow@{budget:g}", GreenFlowPolicy(budget_fraction=budget), 0.0)]
    label = "" if max_gpus == 1 else f", pairs <= {max_gpus} GPUs"
    for s in shares:
        runs += [(f"eaco share={s:g}{label}", EaCoPolicy(mechanism=mechanism, max_gpus=max_gpus), s),
                 (f"greenflow@{budget:g}+share share={s:g}",
                  GreenFlowPolicy(budget_fraction=budget, colocation=Colocation(mechanism=mechanism)), s)]
    rows = []
    for name, policy, share in runs:
        result = simulate(workload, spec, policy, signal, models, region, TraceOptions(accept_share=share))
        rows.append({"trace": f"{workload.name}[{len(workload)}]", "region": region, "policy": name,
                     "wall_s": result.wall_s, **{k: result.summary[k] for k in KEYS}})
    return rows


def table(rows: list[dict[str, object]]) -> Table:
    t = Table(title="Total energy and carbon (jobs + idle GPUs), avg JCT, GPU use; x = ratio to FIFO of the cell")
    for col in ("trace", "region", "policy", "energy kWh", "x", "carbon kg", "x", "avg JCT h", "x", "GPUs alloc",
                "shared", "jobs' kWh x"):
        t.add_column(col, justify="left" if col in ("trace", "region", "policy") else "right")
    fifo: dict[tuple[object, object], dict[str, object]] = {}
    for r in rows:
        key = (r["trace"], r["region"])
        if r["policy"] == "fifo":
            fifo[key] = r
        f = fifo[key]
        t.add_row(str(r["trace"]), str(r["region"]), str(r["policy"]), f"{r['total_energy_kwh']:,.0f}",
                  f"{r['total_energy_kwh'] / f['total_energy_kwh']:.3f}", f"{r['total_carbon_kg']:,.0f}",
                  f"{r['total_carbon_kg'] / f['total_carbon_kg']:.3f}", f"{r['avg_jct_s'] / 3600:.2f}",
                  f"{r['avg_jct_s'] / f['avg_jct_s']:.3f}", f"{r['gpu_utilisation']:.3f}", f"{r['shared_share']:.3f}",
                  f"{r['energy_kwh'] / f['energy_kwh']:.3f}")
    return t


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", default=DEFAULT_TRACES)
    parser.add_argument("--regions", default="DE-LU,GB,US-CAL-CISO")
    parser.add_argument("--shares", default="0.5,1", help="shares of jobs that allow a shared GPU (EaCO rows)")
    parser.add_argument("--gpu", default=None, help="the cluster's GPU type (default: the trace's, V100 models)")
    parser.add_argument("--mechanism", default="timeslice", choices=("timeslice", "mps"))
    parser.add_argument("--max-gpus", type=int, default=1,
                        help="EaCO pairs jobs of up to this many GPUs (1: what Slurm's shards enact; more: simulator only)")
    parser.add_argument("--budget", type=float, default=1.0, help="GreenFlow's budget, x FIFO's carbon (both rows)")
    parser.add_argument("--suspend-after", type=float, default=None,
                        help="minutes idle before Slurm suspends a node (sim/power_saving.py; default: never)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    began = time.perf_counter()
    shares = [float(s) for s in args.shares.split(",")]
    rows = [row for trace in args.traces.split(",") for region in args.regions.split(",")
            for row in run_cell(trace, region, shares, args.gpu, args.mechanism, args.max_gpus, args.budget,
                            None if args.suspend_after is None else args.suspend_after * 60.0)]
    Console(width=160).print(table(rows))
    print(f"GPU {args.gpu or 'per trace'}, mechanism {args.mechanism}, {time.perf_counter() - began:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
