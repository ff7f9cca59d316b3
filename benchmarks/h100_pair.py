"""EaCO's co-location decisions for the H100, predicted against what a real H100 measured.

    .venv/bin/python benchmarks/h100_pair.py            # the decisions, and the comparison
    .venv/bin/python benchmarks/h100_pair.py --args     # only the pairs, as node_hooks_pair.py takes them

The decisions: every pair of the five workload families of ``perf_energy/h100`` (each job
named by its Gavel type, which on the H100 stands for its family's workload), asked of
EaCO's pair rule (``policy/eaco.pair_cap``: each member's stretch within the bound, 1.25 by
default, at the cap that needs the least pair energy per unit of both jobs' work) under
``mps`` (gres/mps) and ``timeslice`` (gres/shard). The model was fitted on the H100's pairs at
full power; no pair under a cap was ever measured, so a pair at its decided cap is a
held-out test of the slowdown, cap and pair-power models together.

The measurements: ``benchmarks/h100/results/hooks.csv``, made by
``benchmarks/h100/node_hooks_pair.py`` on one H100 (see ``benchmarks/h100/README.md``):
each job alone at the default limit and at the cap, and the pair under MPS, started by
slurm-green's own Prolog from decision tokens carrying the cap; and ``hooks_timeslice.csv``:
two pairs EaCO refuses time-sliced, run time-sliced at their MPS cap, to see whether the
refusal was right.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import re
from pathlib import Path

from rich.console import Console
from rich.table import Table

from slurm_green.models.registry import default_registry
from slurm_green.policy.eaco import pair_at_caps, pair_cap

#: The workload families of perf_energy/h100 and the Gavel type each stands for.
FAMILIES = {"resnet50": "ResNet-50 (batch size 64)", "resnet18": "ResNet-18 (batch size 64)",
            "transformer": "Transformer (batch size 64)", "lstm_lm": "LM (batch size 20)",
            "recommendation": "Recommendation (batch size 2048)"}
RESULTS = Path(__file__).with_name("h100") / "results" / "hooks.csv"
#: Pairs EaCO refuses time-sliced, measured time-sliced at the cap it gives them under MPS.
REFUSED = RESULTS.with_name("hooks_timeslice.csv")
BOUND = 1.25


def decisions(models, mechanism: str, bound: float = BOUND) -> list[tuple[str, str, float | None]]:
    """(a, b, cap) of every pair EaCO would co-locate (cap None: full power)."""
    found = []
    for a, b in itertools.combinations(FAMILIES, 2):
        cap = pair_cap(models, FAMILIES[a], FAMILIES[b], "h100", mechanism, bound)
        # pair_cap's None means either "no cap keeps both within the bound" or "full power":
        # EaCO's own check (each stretch at the cap within the bound) tells the two apart.
        at_cap = pair_at_caps(models, FAMILIES[a], FAMILIES[b], "h100", mechanism, [cap])
        if max(at_cap.stretch_a[0], at_cap.stretch_b[0]) <= bound:
            found.append((a, b, cap))
    return found


def predicted(models, a: str, b: str, cap: float, mechanism: str = "mps", gpu: str = "h100") -> dict[str, float]:
    """The models' view of the pair at ``cap`` on ``gpu``, as EaCO prices it (``eaco.pair_at_caps``):
    each job's rate at the cap (vs alone at full power), its co-location slowdown, its stretch
    (the two together) and the pair's power under the cap."""
    at_cap = pair_at_caps(models, FAMILIES[a], FAMILIES[b], gpu, mechanism, [cap])
    return {"rate_a": float(at_cap.rate_a[0]), "rate_b": float(at_cap.rate_b[0]), "slow_a": float(at_cap.slow_a[0]),
            "slow_b": float(at_cap.slow_b[0]), "stretch_a": float(at_cap.stretch_a[0]),
            "stretch_b": float(at_cap.stretch_b[0]), "pair_w": float(at_cap.pair_w[0])}


def measured(rows: list[dict[str, str]], a: str, b: str, cap: float, mechanism: str = "mps") -> dict[str, float] | None:
    alone = {(r["a"], float(r["cap"])): r for r in rows if r["run"] == "alone"}
    pair = next((r for r in rows if r["run"] == f"pair-{mechanism}-hooks" and (r["a"], r["b"]) == (a, b)
                 and abs(float(r["cap"]) - cap) < 1e-9), None)
    try:
        full = [float(alone[(x, 1.0)]["a_steps_per_s"]) for x in (a, b)]
        capped = [float(alone[(x, cap)]["a_steps_per_s"]) for x in (a, b)]
        power_full = [float(alone[(x, 1.0)]["avg_power_w"]) for x in (a, b)]
    except KeyError:
        return None
    if pair is None:
        return None
    shared = [float(pair["a_steps_per_s"]), float(pair["b_steps_per_s"])]
    pair_w = float(pair["avg_power_w"])
    work = shared[0] / full[0] + shared[1] / full[1]  # job-seconds of full-speed work per second
    return {"rate_a": capped[0] / full[0], "rate_b": capped[1] / full[1],
            "slow_a": capped[0] / shared[0], "slow_b": capped[1] / shared[1],
            "stretch_a": full[0] / shared[0], "stretch_b": full[1] / shared[1], "pair_w": pair_w,
            "energy_vs_apart": (pair_w / work) / (sum(power_full) / 2), "note": pair["note"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--args", action="store_true", help="print the decided MPS pairs as A+B@CAP and stop")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    models = default_registry()
    decided = {mech: decisions(models, mech) for mech in ("mps", "timeslice")}
    if args.args:
        print(" ".join(f"{a}+{b}@{cap or 1.0:g}" for a, b, cap in decided["mps"]))
        return 0
    console = Console(width=max(Console().width, 150))
    for mech, pairs in decided.items():
        console.print(f"EaCO on one H100, {mech}, bound {BOUND}: "
                      + (", ".join(f"{a}+{b} at cap {cap or 1.0:g}" for a, b, cap in pairs) or "no pair co-located"))
    rows = list(csv.DictReader(args.results.open())) if args.results.exists() else []
    if not rows:
        console.print(f"no measurements in {args.results}: run benchmarks/h100/node_hooks_pair.py on a GPU")
        return 0
    table = Table(title="Decided MPS pairs on the H100: predicted / measured "
                        "(rate: alone at the cap vs alone at full power; slowdown: alone at the cap vs shared; "
                        "stretch: alone at full power vs shared at the cap)")
    for column in ("pair @ cap", "job", "rate", "slowdown", "stretch", "pair W", "energy vs apart"):
        table.add_column(column, justify="right")
    errors = []
    for a, b, cap in decided["mps"]:
        cap = cap or 1.0
        p, m = predicted(models, a, b, cap), measured(rows, a, b, cap)
        if m is None:
            table.add_row(f"{a}+{b} @ {cap:g}", "-", "not measured", "", "", "", "")
            continue
        for side, job in (("a", a), ("b", b)):
            errors.append(abs(p[f"stretch_{side}"] / m[f"stretch_{side}"] - 1))
            table.add_row(f"{a}+{b} @ {cap:g}" if side == "a" else "", job,
                          f"{p[f'rate_{side}']:.2f} / {m[f'rate_{side}']:.2f}",
                          f"{p[f'slow_{side}']:.2f} / {m[f'slow_{side}']:.2f}",
                          f"{p[f'stretch_{side}']:.2f} / {m[f'stretch_{side}']:.2f}"
                          + (" (over bound)" if m[f"stretch_{side}"] > BOUND else ""),
                          f"{p['pair_w']:.0f} / {m['pair_w']:.0f}" if side == "a" else "",
                          f"{m['energy_vs_apart']:.2f}" if side == "a" else "")
    console.print(table)
    if errors:
        console.print(f"stretch error: mean {sum(errors) / len(errors):.1%}, max {max(errors):.1%} over {len(errors)} jobs")
    refused = list(csv.DictReader(REFUSED.open())) if REFUSED.exists() else []
    for row in (r for r in refused if r["run"] == "pair-timeslice-hooks"):
        a, b, cap = row["a"], row["b"], float(row["cap"])
        p, m = predicted(models, a, b, cap, "timeslice"), measured(refused, a, b, cap, "timeslice")
        if m is None:
            continue
        console.print(f"refused time-sliced, measured anyway ({REFUSED.name}): {a}+{b} at cap {cap:g}: stretch "
                      f"{a} {p['stretch_a']:.2f} predicted / {m['stretch_a']:.2f} measured, "
                      f"{b} {p['stretch_b']:.2f} / {m['stretch_b']:.2f} (bound {BOUND})")
    for row in rows + refused:
        if row["run"].startswith("pair-"):
            limits = re.sub(r"; compute apps.*", "", row["note"], flags=re.S)
            console.print(f"[bold]{row['a']}+{row['b']}[/bold] ({row['run']}): {limits}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
