"""Median time of one GreenFlow decision: 10,000 pending jobs on 1,024 nodes x 8 GPUs.

Half the GPUs are busy (random partial nodes), jobs ask for 1-32 GPUs with a 2x
range and up to 24 h of flexibility, the carbon forecast is a week of real DE-LU
2023 data (synthetic if the shared data is missing), and the models are the
default registry. Usage: python benchmarks/policy_decision_time.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from slurm_green.core.cluster import ClusterSnapshot, Job, Node
from slurm_green.core.decision import DecisionContext, DecisionMemo
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.models.registry import default_registry
from slurm_green.policy.greenflow import GreenFlowPolicy, powerflow
from slurm_green.sim.carbon import replayed_signal

NOW = 1686009600.0  # 2023-06-06 00:00 UTC


def cluster(rng: np.random.Generator, nodes: int = 1024, gpn: int = 8, jobs: int = 10_000) -> ClusterSnapshot:
    node_list = []
    for i in range(nodes):
        used = tuple(sorted(rng.choice(gpn, size=int(rng.integers(0, gpn + 1)), replace=False).tolist()))
        node_list.append(Node(f"n{i:04d}", gpus_total=gpn, gpus_allocated=len(used), gpu_indices_allocated=used,
                              features=(f"switch=sw{i // 32}",)))
    types = ["", "ResNet-50 (batch size 64)", "cifar10", "bert", "Transformer (batch size 128)", "ncf"]
    sizes = rng.choice([1, 1, 1, 1, 2, 4, 8, 16, 32], size=jobs)
    pending = []
    for j in range(jobs):
        g = int(sizes[j])
        flex = float(rng.choice([0.0, 6.0, 24.0])) * 3600.0
        submit = NOW - float(rng.uniform(0, 3600))
        options = GreenOptions(max_delay_s=flex, gpus_min=max(1, g // 2), gpus_max=g * 2, deadline=submit + flex)
        per_node, count = (g, 1) if g <= gpn else (gpn, g // gpn)
        pending.append(Job(j + 1, name=types[j % len(types)], submit_time=submit,
                           time_limit_s=float(rng.uniform(600, 48 * 3600)), gpus_per_node=per_node,
                           num_nodes=count, admin_comment=format_marker(options)))
    return ClusterSnapshot(taken_at=NOW, jobs=tuple(pending), nodes=tuple(node_list))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    snapshot = cluster(rng)
    try:
        signal = replayed_signal("DE-LU", NOW - 3600, NOW + 8 * 86400)
        carbon = "DE-LU 2023"
    except ValueError:
        signal = replayed_signal("synthetic", NOW - 3600, NOW + 8 * 86400)
        carbon = "synthetic"
    models = default_registry()
    print(f"10,000 pending jobs, 1,024 x 8 GPUs ({snapshot.gpus_free} free), carbon {carbon}")
    for policy in (GreenFlowPolicy(budget_fraction=0.8), GreenFlowPolicy(budget_fraction=None, price=5e4),
                   powerflow(0.8)):
        context = DecisionContext(snapshot, signal, models, NOW, DecisionMemo())  # one controller's
        policy(context)  # warm its memo (the model table), as every tick after a controller's first
        times = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            plan = policy(context)
            times.append(time.perf_counter() - began)
        started = sum(1 for d in plan.decisions if d.nodes)
        setting = f"budget {policy.budget_fraction}" if policy.budget_fraction else f"price {policy.price:g}"
        print(f"{policy.name:10s} {setting:12s} median {statistics.median(times):.3f} s "
              f"(min {min(times):.3f}, max {max(times):.3f}; {len(plan.decisions)} decisions, {started} placed)")


if __name__ == "__main__":
    main()
