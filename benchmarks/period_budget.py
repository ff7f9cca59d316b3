"""A carbon budget per day, kept by pacing GreenFlow tick by tick: adherence and its price.

Runs FIFO, GreenFlow at its default (a budget of 1 x the carbon-agnostic plan per decision,
no period budget) and GreenFlow paced to a daily budget (``[budget] carbon_kg``, the
controller's own ``PeriodBudget`` reading its own store, in memory here) on one trace and
region. The daily limit is ``--fraction`` of FIFO's mean daily carbon over the days FIFO
used GPUs at all. Each day's carbon is the jobs' GPU power from the simulator's samples
(the truth, not the controller's accounting) times the grid's intensity, from UTC midnight.

Prints per policy: average JCT, total carbon, days over the limit (of active days), the
worst and the 90th-percentile day as a multiple of the limit.

Usage: python benchmarks/period_budget.py [--trace gavel_philly_ee9e8c_seed0.trace] [--region GB]
       [--fraction 0.8] [--limit N]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from slurm_green.carbon.datasets import shared_data_dir
from slurm_green.cli.sim import _cluster, _load, _models, _signal
from slurm_green.controller.budget import PeriodBudget
from slurm_green.policy.baselines import FifoPolicy
from slurm_green.policy.greenflow import GreenFlowPolicy
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.runner import RunResult, simulate

DAY = 86400.0


def daily_carbon(run: RunResult, signal: object, first: float, days: int) -> np.ndarray:
    return np.array([run.record.jobs_carbon_kg(signal, first + d * DAY, first + (d + 1) * DAY) for d in range(days)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="gavel_philly_ee9e8c_seed0.trace")
    parser.add_argument("--region", default="GB")
    parser.add_argument("--fraction", type=float, default=0.8, help="daily limit as a fraction of FIFO's mean day")
    parser.add_argument("--limit", type=int, default=None, help="only the first N jobs")
    args = parser.parse_args()
    console = Console()
    workload = _load(str(shared_data_dir() / "job_traces" / args.trace), args.limit)
    spec, models, signal = _cluster(workload, None, None), _models(), _signal(args.region, workload)
    options = TraceOptions()
    began = time.perf_counter()
    fifo = simulate(workload, spec, FifoPolicy(), signal, models, args.region, options)
    first = math.floor(float(workload.submit[0]) / DAY) * DAY
    days = int(math.ceil((fifo.record.ended_at - first) / DAY))
    fifo_days = daily_carbon(fifo, signal, first, days)
    active = fifo_days > 0
    limit = args.fraction * float(fifo_days[active].mean())
    runs = {"fifo": fifo,
            "greenflow": simulate(workload, spec, GreenFlowPolicy(), signal, models, args.region, options),
            f"greenflow + {limit:.0f} kg/day": simulate(workload, spec, GreenFlowPolicy(), signal, models, args.region,
                                                        options, budget=PeriodBudget("carbon", limit))}
    table = Table(title=f"{workload.name} on {spec.gpus} GPUs, {args.region}: daily limit {limit:.1f} kg "
                        f"({args.fraction:g} x FIFO's mean active day)")
    for column in ("policy", "avg JCT h", "carbon kg", "days over limit", "worst day / limit", "p90 day / limit",
                   "wall s"):
        table.add_column(column, justify="right")
    for name, run in runs.items():
        per_day = daily_carbon(run, signal, first, max(days, int(math.ceil((run.record.ended_at - first) / DAY))))
        used = per_day[per_day > 0]
        table.add_row(name, f"{run.summary['avg_jct_s'] / 3600:.2f}", f"{run.summary['carbon_kg']:,.1f}",
                      f"{int((used > limit * (1 + 1e-9)).sum())} of {len(used)}", f"{used.max() / limit:.2f}",
                      f"{np.percentile(used, 90) / limit:.2f}", f"{run.wall_s:.0f}")
    console.print(table)
    console.print(f"total {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
