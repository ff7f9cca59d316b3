"""Placement scorers on the Alibaba openb trace, as the FGD paper measures them.

    .venv/bin/python benchmarks/placement_fgd.py [--seeds 3] [--json OUT] [--plot docs/figures/placement_fgd.png]

Each seed draws the arrivals (tasks sampled with replacement up to 130 % of the
cluster's GPU capacity, no departures) and the node order once; every scorer replays
the same arrivals. Prints, per scorer, the median over seeds of the unallocated share
of GPU capacity when the arrived workload reaches 80 ... 130 % of capacity; at 80 %
(every scorer has then placed the same GPU work) the cluster's power, the GPUs with
anything on them and the nodes awake; the power at 100 %. The figure plots unallocated share against
arrived workload (the paper's Fig. 9a axes).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from slurm_green.carbon.datasets import shared_data_dir
from slurm_green.models import default_registry
from slurm_green.policy.placement.scorer import SCORERS
from slurm_green.sim import openb

TABLE_LEVELS = (80, 90, 95, 100, 110, 130)
CURVE_LEVELS = tuple(range(70, 131))


def measure(seeds: int) -> dict[str, dict[str, list]]:
    traces = shared_data_dir() / "job_traces"
    cluster = openb.read_nodes(traces / openb.NODE_LIST)
    pods = openb.read_pods(traces / openb.POD_LIST, cluster.models)
    registry = default_registry()
    out: dict[str, dict[str, list]] = {}
    for name, weights in SCORERS.items():
        runs, start = [], time.perf_counter()
        for seed in range(seeds):
            runs.append(openb.run(weights, cluster, pods, registry, seed=42 + seed, levels_pct=CURVE_LEVELS))
        out[name] = {"unallocated_pct": [list(r.unallocated_pct) for r in runs],
                     "power_kw": [list(r.power_kw) for r in runs],
                     "gpus_in_use": [list(r.gpus_in_use) for r in runs],
                     "nodes_awake": [list(r.nodes_awake) for r in runs],
                     "failed": [r.failed for r in runs], "tasks": [r.tasks for r in runs],
                     "capacity_gpus": cluster.gpu_capacity_milli // 1000, "nodes": len(cluster.names),
                     "seconds_per_run": (time.perf_counter() - start) / seeds}
    return out


def table(results: dict[str, dict[str, list]]) -> str:
    at = {lv: CURVE_LEVELS.index(lv) for lv in TABLE_LEVELS}
    head = ("scorer".ljust(9) + "".join(f"{lv:>7d}%" for lv in TABLE_LEVELS)
            + "   kW@80%  GPUs in use@80%  nodes awake@80%  kW@100%  s/run")
    lines = ["unallocated GPU share (% of capacity) at arrived workload (% of capacity); median of seeds", head]
    for name, r in results.items():
        unalloc = np.median(np.array(r["unallocated_pct"]), axis=0)
        power = np.median(np.array(r["power_kw"]), axis=0)
        in_use = np.median(np.array(r["gpus_in_use"]), axis=0)
        awake = np.median(np.array(r["nodes_awake"]), axis=0)
        lines.append(name.ljust(9) + "".join(f"{unalloc[i]:8.2f}" for i in at.values())
                     + f"{power[at[80]]:9.0f}{in_use[at[80]]:17.0f}{awake[at[80]]:17.0f}{power[at[100]]:9.0f}"
                     + f"{r['seconds_per_run']:7.1f}")
    return "\n".join(lines)


def plot(results: dict[str, dict[str, list]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=120)
    first = next(iter(results.values()))
    for name, r in results.items():
        ax.plot(CURVE_LEVELS, np.median(np.array(r["unallocated_pct"]), axis=0), label=name)
    ax.plot([70, 100, 130], [30, 0, 0], ":", color="grey", label="ideal")
    ax.set(xlabel="arrived workload (% of cluster GPU capacity)", ylabel="unallocated GPU (%)",
           xlim=(75, 130), ylim=(0, 25),
           title=f"Alibaba openb: {first['nodes']:,} nodes, {first['capacity_gpus']:,} GPUs")
    ax.grid(alpha=0.4)
    ax.legend(ncol=2, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    results = measure(args.seeds)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
