"""A mixed cluster (half H100 nodes, half A40): type-aware vs type-blind policies, one table.

Each trace job asks for one GPU type, drawn in proportion to each type's GPUs (as users
of a typed-gres cluster ask for ``--gres=gpu:h100:N``), and runs on nodes of that type
with that type's models (``sim/cluster.py``); with ``--untyped S`` a share S of them asks
for none (plain ``--gres=gpu:N``, the common case) and runs on any node, with the models
of the type it lands on. A job's work is its trace duration at the
registry's own type (V100), so the same job finishes sooner on an H100. Policies:

- ``fifo``: every job now, uncapped.
- ``zeus (type-aware)``: Zeus's cap per job type on the models and allowed caps of the
  GPU type the job asked for.
- ``zeus (type-blind)``: the same policy planning every job as a V100 (``typed=False``),
  which is what every policy did before clusters had types.
- ``greenflow``: as it is today (type-blind); once ``GreenFlowPolicy`` has a ``typed``
  field, the script runs it both ways.

Energy and carbon are the jobs' GPU energy (``energy_kwh``, ``carbon_kg``) and the totals
with every unallocated GPU at idle power (the mean of the two types' idle draw).
"pins refused": node pins (``SetNodes``) onto nodes of another type than the job asked
for, which Slurm and the simulator refuse (a policy blind to types makes them); the
controller's warnings about them are counted here instead of printed.

Usage: python benchmarks/mixed_cluster.py [--traces gavel_philly_ee9e8c_seed0.trace,philly_pollux_jobs.csv:5000]
       [--regions DE-LU] [--types h100,a40] [--untyped 0.0] [--policies fifo,zeus,greenflow] [--json OUT]
A trace is a path (relative ones are under the shared data's job_traces/), optionally ``:N`` for its first N jobs.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import fields
from pathlib import Path

from policy_comparison import parse_trace  # benchmarks/ is the script's folder: on sys.path
from rich.console import Console
from rich.table import Table

from slurm_green.cli.sim import _signal
from slurm_green.models.registry import default_registry
from slurm_green.policy.baselines import FifoPolicy, ZeusCapPolicy
from slurm_green.policy.greenflow import GreenFlowPolicy
from slurm_green.sim.cluster import ClusterSpec, default_cluster
from slurm_green.sim.runner import simulate
from slurm_green.sim.traces import load_trace

DEFAULT_TRACES = "gavel_philly_ee9e8c_seed0.trace,philly_pollux_jobs.csv:5000"
class _RefusedPins(logging.Handler):
    """Counts the controller's warnings about refused ``SetNodes`` actions."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += isinstance(record.args, tuple) and len(record.args) > 1 and record.args[1] == "SetNodes"


KEYS = ("avg_jct_s", "energy_kwh", "carbon_kg", "total_energy_kwh", "total_carbon_kg", "finished", "jobs")


def policies() -> list[tuple[str, object]]:
    runs: list[tuple[str, object]] = [("fifo", FifoPolicy()), ("zeus (type-aware)", ZeusCapPolicy()),
                                      ("zeus (type-blind)", ZeusCapPolicy(name="zeus-blind", typed=False))]
    if "typed" in {f.name for f in fields(GreenFlowPolicy)}:
        return runs + [("greenflow (type-aware)", GreenFlowPolicy(typed=True)),  # type: ignore[call-arg]
                       ("greenflow (type-blind)", GreenFlowPolicy(typed=False))]  # type: ignore[call-arg]
    return runs + [("greenflow (type-blind, as it is)", GreenFlowPolicy())]


def run_cell(trace: str, region: str, types: tuple[str, ...], untyped: float = 0.0,
             only: set[str] | None = None) -> list[dict[str, object]]:
    path, limit = parse_trace(trace)
    workload = load_trace(path)
    workload = workload.head(limit) if limit else workload
    models = default_registry()
    size = default_cluster(workload.name)
    idle_w = sum(models.type_params(t)[0].gpu.idle_w for t in types) / len(types)
    spec = ClusterSpec.mixed(size.nodes, size.gpus_per_node, types, nodes_per_switch=size.nodes_per_switch,
                             idle_w_per_gpu=idle_w, untyped_share=untyped)
    signal = _signal(region, workload)
    rows = []
    tick_log = logging.getLogger("slurm_green.controller.tick")
    tick_log.propagate = False
    for name, policy in policies():
        if only and name.split(" ")[0] not in only:
            continue
        refused = _RefusedPins()
        tick_log.addHandler(refused)
        try:
            result = simulate(workload, spec, policy, signal, models, region)
        finally:
            tick_log.removeHandler(refused)
        rows.append({"trace": f"{workload.name}[{len(workload)}]", "cluster": f"{spec.nodes}x{spec.gpus_per_node} "
                     + "/".join(types) + (f", {untyped:.0%} untyped" if untyped else ""), "region": region, "policy": name, "wall_s": result.wall_s,
                     "pins_refused": refused.count, **{k: result.summary[k] for k in KEYS}})
    return rows


def table(rows: list[dict[str, object]]) -> Table:
    t = Table(title="Mixed cluster: avg JCT, the jobs' GPU energy and carbon (totals with idle GPUs); x FIFO")
    for col in ("trace", "cluster", "region", "policy", "avg JCT h", "energy kWh", "carbon kg", "total kWh",
                "total kg", "finished", "pins refused"):
        t.add_column(col, justify="right")
    fifo = {(r["trace"], r["region"]): r for r in rows if r["policy"] == "fifo"}
    for r in rows:
        f = fifo[(r["trace"], r["region"])]

        def cell(key: str, scale: float = 1.0, fmt: str = ",.1f") -> str:
            return f"{float(r[key]) / scale:{fmt}} ({float(r[key]) / float(f[key]):.3f})"  # type: ignore[arg-type]

        t.add_row(str(r["trace"]), str(r["cluster"]), str(r["region"]), str(r["policy"]),
                  cell("avg_jct_s", 3600.0, ".2f"), cell("energy_kwh"), cell("carbon_kg"), cell("total_energy_kwh"),
                  cell("total_carbon_kg"), f"{r['finished']}/{r['jobs']}", str(r["pins_refused"]))
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=DEFAULT_TRACES, help="comma list of PATH[:N] (default: %(default)s)")
    parser.add_argument("--regions", default="DE-LU")
    parser.add_argument("--types", default="h100,a40", help="GPU types, equal blocks of nodes (default: %(default)s)")
    parser.add_argument("--untyped", type=float, default=0.0,
                        help="share of jobs asking for no GPU type (plain gres/gpu: any node; default: %(default)s)")
    parser.add_argument("--policies", help="comma list of policy families to run (fifo, zeus, greenflow; default: all)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    rows = [row for trace in args.traces.split(",") for region in args.regions.split(",")
            for row in run_cell(trace, region, tuple(args.types.split(",")), args.untyped,
                                set(args.policies.split(",")) if args.policies else None)]
    Console(width=200).print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
