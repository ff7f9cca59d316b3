"""A GPU the models never saw: power caps planned for a real H200 by the conservative board
model, by a type-blind site (an H200 taken for the H100 it resembles), and by an oracle.

    .venv/bin/python benchmarks/unseen_board.py [--sweep CSV] [--probe JSON] [--pair CSV] [--json]

The sweep is one made for this project on a lent H200 (``benchmarks/h100/results/
h200_cap_sweep.csv``: the shared ``perf_energy/h100/cap_sweep.py`` run there, 700 W down to
200 W in 50 W steps, 4 s each) with the board limits slurm-green's own ``NvmlBackend`` read
there (``h200_probe.json``). The shipped parameters know no H200. A site whose main type is
the H100 (``default_registry("h100")``) then sees H200 nodes appear:

* board model: what the controller does once a node's Epilog reports the board
  (``observe_board``): the conservative model of an unprofiled type;
* as H100: a site that labels the new nodes ``h100`` (the H100's fitted model);
* best measured: the sweep's own least-energy cap.

Each cap is scored on the *measured* H200 rows against its uncapped run (``h100_caps.score``).
The prediction columns compare, over every swept cap, each model's energy ratio and time
stretch against the measured ones: a model is *safe* at a cap when it promises no more
saving and no less time than the board delivered (within ``TOLERANCE``, the two runs' noise).

The pair: resnet50 and resnet18 under MPS at cap 0.55 (what EaCO decides on the H100),
started on the H200 by slurm-green's own Prolog (``h200_hooks.csv``, made by
``h100/node_hooks_pair.py``): each way's predicted stretch and EaCO's verdict (bound
``h100_pair.BOUND``) beside the measured stretch.
"""

from __future__ import annotations

import argparse
import csv
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from h100_caps import Choice, score  # benchmarks/ is the script's folder: on sys.path
from h100_pair import BOUND, FAMILIES, measured as measured_pair, predicted as predicted_pair
from slurm_green.core.models import Config, energy_per_work_j
from slurm_green.models import profiles
from slurm_green.models.registry import FittedRegistry, default_registry
from slurm_green.policy.eaco import pair_cap

RESULTS = Path(__file__).resolve().parent / "h100" / "results"
TOLERANCE = 0.03  #: the two H200 runs' J/step agree within 3.4 % at every cap (docs/models.md)


@dataclass(frozen=True)
class Prediction:
    """A model against the measured rows, over every swept cap."""

    energy_err: float  #: mean |predicted - measured| energy ratio (capped / uncapped)
    time_err: float  #: mean |predicted - measured| time stretch
    safe_share: float  #: caps where it promised no more saving and no less time than measured
    worst_overpromise: float  #: largest (measured - predicted) energy ratio: saving promised and not seen


def predicted(registry: FittedRegistry, workload: str, gpu: str, cap: float) -> tuple[float, float]:
    """(energy ratio, time stretch) the model gives one GPU at ``cap`` against uncapped."""
    model = registry.for_job(workload, gpu)
    full, capped = Config(1, 1, 1.0), Config(1, 1, cap)
    return (energy_per_work_j(model, capped) / energy_per_work_j(model, full),
            model.throughput(full) / model.throughput(capped))


def measured(rows: list[profiles.CapRow], cap: float) -> tuple[float, float]:
    full = rows[-1]
    row = min(rows, key=lambda r: abs(r.cap_fraction - cap))
    return (row.time_s * row.power_w) / (full.time_s * full.power_w), row.time_s / full.time_s


def judge(registry: FittedRegistry, workload: str, gpu: str, rows: list[profiles.CapRow]) -> Prediction:
    pairs = [(predicted(registry, workload, gpu, r.cap_fraction), measured(rows, r.cap_fraction)) for r in rows[:-1]]
    safe = [pe >= me - TOLERANCE and pt >= mt - TOLERANCE for (pe, pt), (me, mt) in pairs]
    return Prediction(float(np.mean([abs(pe - me) for (pe, _), (me, _) in pairs])),
                      float(np.mean([abs(pt - mt) for (_, pt), (_, mt) in pairs])),
                      float(np.mean(safe)), float(max(me - pe for (pe, _), (me, _) in pairs)))


PAIR = ("resnet50", "resnet18", 0.55)


def pair(registry: FittedRegistry, ways: dict[str, str], pair_path: Path) -> dict[str, object]:
    """The measured pair beside each way's prediction and EaCO's decision for it under MPS."""
    a, b, cap = PAIR
    out: dict[str, object] = {"pair": f"{a}+{b}@{cap:g}", "bound": BOUND}
    if pair_path.exists():
        seen = measured_pair(list(csv.DictReader(pair_path.open())), a, b, cap)
        out["measured"] = None if seen is None else {k: seen[k] for k in ("stretch_a", "stretch_b", "pair_w")}
    for way, gpu in ways.items():
        p = predicted_pair(registry, a, b, cap, "mps", gpu)
        decided = pair_cap(registry, FAMILIES[a], FAMILIES[b], gpu, "mps", BOUND)
        # pair_cap's None is "full power" or "no cap keeps both within the bound": the stretch at it tells.
        there = predicted_pair(registry, a, b, decided or 1.0, "mps", gpu)
        fits = max(there["stretch_a"], there["stretch_b"]) <= BOUND
        out[way] = {"stretch_a": p["stretch_a"], "stretch_b": p["stretch_b"], "pair_w": p["pair_w"],
                    "eaco": f"co-locate at cap {decided or 1.0:g}" if fits else "refuse"}
    return out


def run(sweep_path: Path, probe_path: Path, pair_path: Path) -> dict[str, object]:
    sweep = profiles.cap_sweep(sweep_path)
    probe = json.loads(probe_path.read_text())
    min_w, max_w, default_w = probe["limits_w"][:3]
    registry = default_registry("h100")
    registry.observe_board(probe["model"], min_w, max_w, default_w)
    unseen = registry.gpu_type(probe["model"])
    _, note = registry.type_params(unseen)
    ways = {"board model": unseen, "as H100": "h100"}
    out: dict[str, dict[str, object]] = {}
    for workload, rows in sorted(sweep.items()):
        best = rows[int(np.argmin([r.time_s * r.power_w for r in rows]))].cap_fraction
        choices: dict[str, Choice] = {way: score(rows, registry.energy_optimal_cap(workload, gpu), max_w)
                                      for way, gpu in ways.items()}
        choices["best measured"] = score(rows, best, max_w)
        out[workload] = {"choices": {k: asdict(v) for k, v in choices.items()},
                         "predictions": {way: asdict(judge(registry, workload, gpu, rows))
                                         for way, gpu in ways.items()}}
    return {"gpu": probe["model"], "type": unseen, "board_w": [min_w, max_w, default_w], "note": note,
            "params_id": registry.params_id, "workloads": out, "pair": pair(registry, ways, pair_path)}


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def show(result: dict[str, object]) -> None:
    ways = ("board model", "as H100", "best measured")
    table = Table(title=f"{result['gpu']} (board {result['board_w']} W), never profiled: energy per step saved "
                        f"by the cap each way chooses, on the measured rows (models {result['params_id']})")
    table.add_column("workload")
    for way in ways:
        for col in ("W", "saved", "time"):
            table.add_column(f"{way} {col}", justify="right")
    workloads: dict[str, dict[str, dict[str, dict[str, float]]]] = result["workloads"]  # type: ignore[assignment]
    for w, r in workloads.items():
        c = r["choices"]
        table.add_row(w, *[cell for way in ways for cell in (f"{c[way]['cap_w']:.0f}", _pct(c[way]["energy_saved"]),
                                                            _pct(c[way]["time_added"]))])
    table.add_section()
    table.add_row("mean", *[cell for way in ways for cell in (
        "", _pct(float(np.mean([r["choices"][way]["energy_saved"] for r in workloads.values()]))), "")])
    console = Console(width=170)
    console.print(table)
    console.print(f"the controller's note for {result['type']}: {result['note']}")
    pred = Table(title="each model against the measured rows, every swept cap below the board's maximum")
    for col in ("workload", "model", "energy ratio err", "time stretch err", "safe caps", "worst over-promise"):
        pred.add_column(col, justify="left" if col in ("workload", "model") else "right")
    for w, r in workloads.items():
        for way, p in r["predictions"].items():
            pred.add_row(w, way, _pct(p["energy_err"]), _pct(p["time_err"]), _pct(p["safe_share"]),
                         _pct(p["worst_overpromise"]))
    console.print(pred)
    shared: dict[str, dict[str, float | str]] = result["pair"]  # type: ignore[assignment]
    seen = shared.get("measured")
    lines = [f"{shared['pair']} under MPS, bound {shared['bound']}: stretch (alone at full power / shared at the cap)"]
    for way in ("board model", "as H100"):
        w = shared[way]
        lines.append(f"  {way:12s} predicts {w['stretch_a']:.2f} / {w['stretch_b']:.2f}, pair {w['pair_w']:.0f} W: "
                     f"EaCO would {w['eaco']}")
    if seen:
        lines.append(f"  measured     {seen['stretch_a']:.2f} / {seen['stretch_b']:.2f}, pair {seen['pair_w']:.0f} W")
    console.print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sweep", type=Path, default=RESULTS / "h200_cap_sweep.csv")
    parser.add_argument("--probe", type=Path, default=RESULTS / "h200_probe.json")
    parser.add_argument("--pair", type=Path, default=RESULTS / "h200_hooks.csv")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.sweep, args.probe, args.pair)
    if args.json:
        print(json.dumps(result, indent=1, default=float))
    else:
        show(result)


if __name__ == "__main__":
    main()
