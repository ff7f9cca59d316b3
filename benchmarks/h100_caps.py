"""Energy saved on a real H100 by power caps alone, against the Zeus baseline at its own best
setting, and the model's error on H100 sweep rows held back from its fit.

    .venv/bin/python benchmarks/h100_caps.py [--json]

Per workload of ``perf_energy/h100/cap_sweep.csv`` (one H100, 700 W board, 200 W minimum):

* caps alone: the cap the shipped H100 model calls energy-optimal among the allowed caps,
  which reach the board's minimum (``FittedRegistry.allowed_caps("h100")``);
* Zeus: the real ``ZeusCapPolicy`` (its cap set 0.5-1.0, i.e. 350-700 W) deciding the
  five jobs on the H100 models, at each of its eta settings; its best setting is the eta
  with the largest mean saving;
* best measured: the sweep's own argmin (what an oracle would pick).

Each choice is scored on the *measured* rows (J/step and steps/s interpolated linearly in
watts between the 50 W steps), against the uncapped 700 W run. The held-out columns
are the error of a fit that never saw every 5th cap (500 W, 250 W) on those rows.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass

import numpy as np
from rich.console import Console
from rich.table import Table

from slurm_green.cli.models import require_perf
from slurm_green.core.cluster import ClusterSnapshot, Job
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.models import evaluation, profiles
from slurm_green.models.registry import FittedRegistry, default_registry
from slurm_green.policy.baselines import ZeusCapPolicy

ETAS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Choice:
    cap_w: float
    energy_saved: float
    time_added: float


def measured_at(rows: list[profiles.CapRow], cap_w: float, board_w: float) -> tuple[float, float]:
    """(J per step, s per step) at ``cap_w``, linear between the measured caps."""
    watts = np.array([r.cap_fraction * board_w for r in rows])
    joules = np.array([r.time_s * r.power_w for r in rows])
    seconds = np.array([r.time_s for r in rows])
    return float(np.interp(cap_w, watts, joules)), float(np.interp(cap_w, watts, seconds))


def score(rows: list[profiles.CapRow], cap_fraction: float, board_w: float) -> Choice:
    cap_w = round(cap_fraction * board_w)
    joules, seconds = measured_at(rows, cap_w, board_w)
    full_j, full_s = measured_at(rows, board_w, board_w)
    return Choice(cap_w, 1.0 - joules / full_j, seconds / full_s - 1.0)


def zeus_caps(registry: FittedRegistry, workloads: list[str], eta: float) -> dict[str, float]:
    """What the Zeus baseline policy decides for one 1-GPU job of each workload on the H100 models."""
    marker = format_marker(GreenOptions(max_delay_s=0.0, accept_cap=True))
    jobs = tuple(Job(i + 1, name=w, submit_time=0.0, time_limit_s=3600.0, gpus_per_node=1, admin_comment=marker)
                 for i, w in enumerate(workloads))
    plan = ZeusCapPolicy(eta=eta)(ClusterSnapshot(taken_at=0.0, jobs=jobs), None, registry, 0.0)
    return {workloads[d.job_id - 1]: d.power_cap_fraction or 1.0 for d in plan.decisions}


def run() -> dict[str, object]:
    perf = require_perf(None)
    sweep = profiles.h100_sweep(perf)
    board_w = profiles.h100_board_w(perf)[1]
    registry = default_registry("h100")
    workloads = sorted(sweep)
    caps_alone = {w: score(sweep[w], registry.energy_optimal_cap(w), board_w) for w in workloads}
    zeus = {eta: {w: score(sweep[w], c, board_w) for w, c in zeus_caps(registry, workloads, eta).items()}
            for eta in ETAS}
    best_eta = max(ETAS, key=lambda eta: np.mean([c.energy_saved for c in zeus[eta].values()]))
    best = {}
    for w, rows in sweep.items():
        i = int(np.argmin([r.time_s * r.power_w for r in rows]))
        best[w] = score(rows, rows[i].cap_fraction, board_w)
    held = {h.model: h for h in evaluation.h100_holdout(perf)}
    pooled = evaluation.pooled(list(held.values()), "h100")
    return {
        "params_id": registry.params_id,
        "allowed_caps_w": [round(c * board_w) for c in registry.allowed_caps()],
        "zeus_best_eta": best_eta,
        "zeus_by_eta": {str(eta): {w: asdict(c) for w, c in z.items()} for eta, z in zeus.items()},
        "workloads": {
            w: {"caps_alone": asdict(caps_alone[w]), "zeus": asdict(zeus[best_eta][w]), "best_measured": asdict(best[w]),
                "held_out": asdict(held[w])}
            for w in workloads
        },
        "mean": {name: float(np.mean([c.energy_saved for c in choice.values()]))
                 for name, choice in (("caps_alone", caps_alone), ("zeus", zeus[best_eta]), ("best_measured", best))},
        "held_out_pooled": asdict(pooled),
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def show(result: dict[str, object]) -> None:
    eta = result["zeus_best_eta"]
    table = Table(title=f"H100 (700 W board): energy per step saved vs uncapped, measured rows "
                        f"(models {result['params_id']}); Zeus at its best eta = {eta}")
    for col in ("workload", "caps alone W", "saved", "time", f"Zeus W", "saved ", "time ",
                "best measured W", "saved  ", "held-out steps/s err", "power err"):
        table.add_column(col, justify="left" if col == "workload" else "right")
    for w, r in result["workloads"].items():  # type: ignore[union-attr]
        a, z, b, h = r["caps_alone"], r["zeus"], r["best_measured"], r["held_out"]
        table.add_row(w, f"{a['cap_w']:.0f}", _pct(a["energy_saved"]), _pct(a["time_added"]),
                      f"{z['cap_w']:.0f}", _pct(z["energy_saved"]), _pct(z["time_added"]),
                      f"{b['cap_w']:.0f}", _pct(b["energy_saved"]),
                      _pct(h["throughput_mape"]), _pct(h["power_mape"]))
    mean, pooled = result["mean"], result["held_out_pooled"]
    table.add_section()
    table.add_row("mean", "", _pct(mean["caps_alone"]), "", "", _pct(mean["zeus"]), "", "",  # type: ignore[index]
                  _pct(mean["best_measured"]), _pct(pooled["throughput_mape"]), _pct(pooled["power_mape"]))  # type: ignore[index]
    console = Console(width=160)
    console.print(table)
    console.print(f"allowed H100 caps (W): {result['allowed_caps_w']}; held-out rows: {pooled['rows']} "  # type: ignore[index]
                  f"(naive: steps/s {_pct(pooled['throughput_naive_mape'])}, power "  # type: ignore[index]
                  f"{_pct(pooled['power_naive_mape'])})")  # type: ignore[index]


def main() -> None:
    result = run()
    if "--json" in sys.argv[1:]:
        print(json.dumps(result, indent=1, default=float))
    else:
        show(result)


if __name__ == "__main__":
    main()
