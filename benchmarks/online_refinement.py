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
"""

from __future__ import annotations

import argparse
import statistics

from rich.console import Console
from rich.table import Table

from slurm_green.carbon.datasets import shared_data_dir
from slurm_green.cli.sim import _cluster, _load, _signal
from slurm_green.core.models import Config
from slurm_green.models.registry import default_registry
from slurm_green.sim.bench import make_policy
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.runner import RunResult, simulate


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="gavel_philly_ee9e8c_seed0.trace:500", help="PATH[:N] under job_traces")
    parser.add_argument("--carbon", default="DE-LU")
    parser.add_argument("--policy", default="greenflow")
    parser.add_argument("--believed", default="v100")
    parser.add_argument("--true", dest="true_gpu", default="p100")
    parser.add_argument("--flex", type=float, default=24.0, help="hours of start flexibility every job grants")
    args = parser.parse_args()
    name, _, limit = args.trace.partition(":")
    workload = _load(str(shared_data_dir() / "job_traces" / name), int(limit) if limit else None)
    spec, signal, options = _cluster(workload, None, None), _signal(args.carbon, workload), TraceOptions(flex_s=args.flex * 3600.0)
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
