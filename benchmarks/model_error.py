"""Held-out error of the fitted throughput/energy models, and the cost of evaluating them.

    .venv/bin/python benchmarks/model_error.py [--json]

Prints the same tables as ``slurm-green models report`` (the packaged parameters), then
how long a fit and the registry's load take and what one ``throughput``+``power_w``
evaluation costs.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from rich.console import Console

from slurm_green.cli.models import build_report, print_report, require_perf
from slurm_green.models import Config, default_registry
from slurm_green.models.registry import _load, fitted_params


def timings(perf) -> dict[str, float]:  # noqa: ANN001
    start = time.perf_counter()
    fitted_params(perf)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    registry = default_registry()
    load_s = time.perf_counter() - start
    models = [registry.for_job(t) for t in registry.job_types]
    configs = [Config(g, max(1, g // 4), c) for g in (1, 2, 4, 8, 16, 32) for c in (0.4, 0.6, 0.8, 1.0)]
    start = time.perf_counter()
    calls = 0
    for _ in range(50):
        for m in models:
            for cfg in configs:
                m.throughput(cfg)
                m.power_w(cfg)
                calls += 1
    scalar_us = (time.perf_counter() - start) / calls * 1e6
    g = np.tile(np.array([1, 2, 4, 8, 16, 32]), 10_000)
    start = time.perf_counter()
    models[0].throughput_array(g, 1, 0.7)
    models[0].power_w_array(g, 1, 0.7)
    vector_us = (time.perf_counter() - start) / g.size * 1e6
    return {"fit_s": fit_s, "load_s": load_s, "scalar_pair_us": scalar_us, "vector_pair_us": vector_us}


def main() -> None:
    as_json = "--json" in sys.argv[1:]
    perf = require_perf(None)
    fitted_params.cache_clear()
    _load.cache_clear()
    cost = timings(perf)
    report = build_report(perf, default_registry())
    if as_json:
        print(json.dumps({**report, "timings": cost}, indent=1, default=float))
        return
    console = Console()
    print_report(report, console)
    console.print(f"fit {cost['fit_s']:.2f} s, packaged parameters load {cost['load_s']:.3f} s; "
                  "throughput+power_w per config: "
                  f"{cost['scalar_pair_us']:.2f} us scalar, {cost['vector_pair_us']:.3f} us vectorised")


if __name__ == "__main__":
    main()
