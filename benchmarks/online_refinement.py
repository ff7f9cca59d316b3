"""Does online refinement help when the controller's models are wrong for the site?

    .venv/bin/python benchmarks/online_refinement.py [--trace gavel_philly_ee9e8c_seed0.trace:500]
        [--carbon DE-LU] [--policy greenflow] [--believed v100 --true p100]

The site's jobs really run as the models fitted on the ``--true`` GPU's profiles say
(throughput and power); the controller ships with models fitted on ``--believed``. Three
runs of the same trace, carbon series and policy, side by side:

- oracle:   the controller knows the truth (believed = true);
- stale:    it keeps the believed models;
- learning: it starts from the believed models, and every finished job's measured
            throughput and power (the simulated truth, as telemetry) refine them
            (``FittedRegistry.observe``).

It prints average JCT, energy and carbon of each, and the models' error against the truth
over the (job type, configuration) pairs the run used: the mean absolute relative error
of throughput and of power, before and after the run.

With ``--elastic SHARE`` that share of the jobs opt in to checkpoint-and-requeue and the
policy grows and shrinks them while they run (``resizing(policy, shrink=True)``); the runs
are then about what the jobs' own progress reports teach (``[elastic] learn_scaling``,
``models/measured.py``), not telemetry:

- oracle:   the controller knows the truth;
- stale:    it keeps the believed models and ignores the reports' rates;
- measured: it starts from the believed models and rates every job resized once by how its
            reports say it scaled between its sizes (only ever worse than modelled).

The scaling error is, over the jobs measured at two or more GPU counts, the mean |modelled
speedup / true speedup - 1| from each job's smallest count to each other it ran at, of the
believed model and of the model corrected by the job's reports.
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import replace

from rich.console import Console
from rich.table import Table

from slurm_green.carbon.datasets import shared_data_dir
from slurm_green.carbon.signal import CarbonSignal
from slurm_green.cli.sim import _cluster, _load, _signal
from slurm_green.controller.resize import ResizeSettings
from slurm_green.controller.store import StateStore
from slurm_green.core.models import Config, ModelRegistry
from slurm_green.core.progress import MeasuredRate
from slurm_green.models.measured import corrected
from slurm_green.models.registry import default_registry
from slurm_green.policy.running import resizing
from slurm_green.sim.bench import make_policy
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.runner import RunResult, simulate
from slurm_green.sim.workload import Workload


def model_error(believed: object, truth: object, result: RunResult, job_types: list[str]) -> tuple[float, float]:
    """Mean |believed / true - 1| of throughput and of power over the configurations jobs ran in."""
    record = result.record
    pairs = {(job_types[i], Config(int(record.gpus[i]), int(record.nodes[i]), float(record.cap[i])))
             for i in range(len(job_types)) if record.gpus[i] > 0}
    errors_t, errors_p = [], []
    for job_type, config in pairs:
        b, t = believed.for_job(job_type), truth.for_job(job_type)  # type: ignore[attr-defined]
        errors_t.append(abs(b.throughput(config) / t.throughput(config) - 1))
        errors_p.append(abs(b.power_w(config) / t.power_w(config) - 1))
    return statistics.fmean(errors_t), statistics.fmean(errors_p)


def scaling_error(believed: ModelRegistry, truth: ModelRegistry, rates: dict[int, tuple[MeasuredRate, ...]],
                  job_types: list[str]) -> tuple[float, float, int]:
    """(believed, corrected) mean |speedup / true speedup - 1| over the measured jobs' counts,
    and how many jobs were measured at two counts or more."""
    errors_b, errors_c = [], []
    for job_id, measured in rates.items():
        if len(measured) < 2:
            continue
        job_type = job_types[job_id - 1]
        b, t = believed.for_job(job_type), truth.for_job(job_type)
        c = corrected(b, measured)
        base = Config(measured[0].gpus)
        for m in measured[1:]:
            true = t.throughput(Config(m.gpus)) / t.throughput(base)
            errors_b.append(abs(b.throughput(Config(m.gpus)) / b.throughput(base) / true - 1))
            errors_c.append(abs(c.throughput(Config(m.gpus)) / c.throughput(base) / true - 1))
    if not errors_b:
        return math.nan, math.nan, 0
    return statistics.fmean(errors_b), statistics.fmean(errors_c), sum(len(m) >= 2 for m in rates.values())


def elastic_runs(args: argparse.Namespace, workload: Workload, spec: ClusterSpec, signal: CarbonSignal,
                 options: TraceOptions) -> None:
    """The three runs of the module docstring's ``--elastic`` part, and their table."""
    truth = default_registry(args.true_gpu)
    options = replace(options, accept_requeue=args.elastic)
    rows = []
    for label, believed, learn in (("oracle", default_registry(args.true_gpu), True),
                                   ("stale", default_registry(args.believed), False),
                                   ("measured", default_registry(args.believed), True)):
        store = StateStore(":memory:")
        result = simulate(workload, spec, resizing(make_policy(args.policy), shrink=True), signal, believed,
                          args.carbon, options, truth=truth, store=store,
                          resize=ResizeSettings(min_interval_s=3600.0, learn_scaling=learn))
        rates = store.rates(range(1, len(workload) + 1))
        rows.append((label, result, scaling_error(believed, truth, rates, list(workload.job_type))))
        print(f"{label}: {result.wall_s:.1f} s", flush=True)
    table = Table(title=f"{workload.name} ({len(workload)} jobs, {args.elastic:.0%} elastic), {args.carbon}, "
                        f"{args.policy} growing and shrinking running jobs; jobs run as {args.true_gpu}, "
                        f"controller believes {args.believed}")
    for column in ("run", "avg JCT h", "energy kWh", "carbon kg", "JCT / oracle", "restarts",
                   "jobs measured at 2+ counts", "scaling err modelled -> corrected"):
        table.add_column(column, justify="right")
    oracle = rows[0][1].summary
    for label, result, (before, after, measured) in rows:
        s = result.summary
        table.add_row(label, f"{s['avg_jct_s'] / 3600:.2f}", f"{s['energy_kwh']:,.0f}", f"{s['carbon_kg']:,.1f}",
                      f"{s['avg_jct_s'] / oracle['avg_jct_s']:.3f}", f"{s['restarts']}", f"{measured}",
                      f"{before:.1%} -> {after:.1%}" if label == "measured" else "")
    Console(width=200).print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="gavel_philly_ee9e8c_seed0.trace:500", help="PATH[:N] under job_traces")
    parser.add_argument("--carbon", default="DE-LU")
    parser.add_argument("--policy", default="greenflow")
    parser.add_argument("--believed", default="v100")
    parser.add_argument("--true", dest="true_gpu", default="p100")
    parser.add_argument("--flex", type=float, default=24.0, help="hours of start flexibility every job grants")
    parser.add_argument("--elastic", type=float, default=0.0,
                        help="share of jobs that opt in to checkpoint-and-requeue: the --elastic runs instead")
    args = parser.parse_args()
    name, _, limit = args.trace.partition(":")
    workload = _load(str(shared_data_dir() / "job_traces" / name), int(limit) if limit else None)
    spec, signal, options = _cluster(workload, None, None), _signal(args.carbon, workload), TraceOptions(flex_s=args.flex * 3600.0)
    if args.elastic > 0:
        elastic_runs(args, workload, spec, signal, options)
        return
    truth = default_registry(args.true_gpu)
    rows = []
    for label, believed, learn in (("oracle", default_registry(args.true_gpu), False),
                                   ("stale", default_registry(args.believed), False),
                                   ("learning", default_registry(args.believed), True)):
        result = simulate(workload, spec, make_policy(args.policy), signal, believed, args.carbon, options,
                          truth=truth, learn=learn)
        before = model_error(default_registry(args.believed) if label != "oracle" else truth, truth, result,
                             list(workload.job_type))
        after = model_error(believed, truth, result, list(workload.job_type))
        rows.append((label, result, before, after))
        print(f"{label}: {result.wall_s:.1f} s", flush=True)
    table = Table(title=f"{workload.name} ({len(workload)} jobs), {args.carbon}, {args.policy}; "
                        f"jobs run as {args.true_gpu}, controller believes {args.believed}")
    for column in ("run", "avg JCT h", "energy kWh", "carbon kg", "JCT / oracle", "carbon / oracle",
                   "throughput err before -> after", "power err before -> after"):
        table.add_column(column, justify="right")
    oracle = rows[0][1].summary
    for label, result, before, after in rows:
        s = result.summary
        table.add_row(label, f"{s['avg_jct_s'] / 3600:.2f}", f"{s['energy_kwh']:,.0f}", f"{s['carbon_kg']:,.1f}",
                      f"{s['avg_jct_s'] / oracle['avg_jct_s']:.3f}", f"{s['carbon_kg'] / oracle['carbon_kg']:.3f}",
                      f"{before[0]:.1%} -> {after[0]:.1%}", f"{before[1]:.1%} -> {after[1]:.1%}")
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
