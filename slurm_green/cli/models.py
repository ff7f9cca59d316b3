"""``slurm-green models``: inspect, evaluate and (on purpose only) fit the throughput/energy models."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from slurm_green.models import evaluation, freezing, profiles
from slurm_green.models.colocation_error import colocation_holdouts
from slurm_green.models.data_paths import has_perf_energy, perf_energy_dir
from slurm_green.models.registry import FittedRegistry, default_registry

DATA_HELP = "The folder holding perf_energy/ (default: $SLURM_GREEN_DATA, else ../shared/data)."


def require_perf(data_dir: str | None) -> Path:
    perf = perf_energy_dir(Path(data_dir) if data_dir else None)
    if not has_perf_energy(perf.parent):
        raise click.ClickException(f"no profile data under {perf} (set SLURM_GREEN_DATA or --data)")
    return perf


def load_registry(params: str | None, corrections: str | None = None) -> FittedRegistry:
    """The registry a controller would load (``--params``, else $SLURM_GREEN_MODEL_PARAMS, else
    packaged), with the telemetry corrections and node boards it keeps (``--corrections``)."""
    try:
        return default_registry(params_path=params, corrections_path=corrections)
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


#: The models' error report: a JSON document (``--json`` writes it as built), read back by key.
ModelReport = dict[str, Any]


def build_report(perf: Path, registry: FittedRegistry, progress: Progress | None = None) -> ModelReport:
    steps = ["gavel", "pollux", *profiles.ZEUS_MAX_LIMIT_W, "h100", "optima"]
    task = progress.add_task("held-out fits", total=len(steps)) if progress else None
    holdouts: list[evaluation.HoldoutError] = []
    for step in steps[:-1]:
        if step == "gavel":
            holdouts += evaluation.gavel_holdout(perf)
        elif step == "pollux":
            holdouts += evaluation.pollux_holdout(perf)
        elif step == "h100":
            holdouts += evaluation.h100_holdout(perf)
        else:
            holdouts += evaluation.cap_holdout(perf, step)
        if progress and task is not None:
            progress.advance(task)
    measured, modelled = evaluation.energy_optimal_caps(perf), evaluation.model_optimal_caps(perf)
    optima = {}
    for gpu in (None, *evaluation.swept(perf)):
        pick = lambda rows: [o for o in rows if gpu is None or o.gpu == gpu]  # noqa: E731
        optima[gpu or "all"] = {
            "measured_all_sweeps": evaluation.summarise_optima(pick(measured)),
            "measured_cap_bound": evaluation.summarise_optima(pick(measured), only_cap_bound=True),
            "model_cap_bound": evaluation.summarise_optima(pick(modelled), only_cap_bound=True),
        }
    if progress and task is not None:
        progress.advance(task)
    return {
        "params_id": registry.params_id,
        "gpu_types": [asdict(o) for o in evaluation.type_optima(registry)],
        "holdout": [asdict(h) for h in holdouts],
        "pooled": [asdict(evaluation.pooled(holdouts, p)) for p in ("gavel", "pollux", "zeus", "h100")],
        "energy_optimal_cap": optima,
        "frequency_optimum": [asdict(o) for o in evaluation.frequency_optimum(perf)],
        "colocation": [asdict(e) for e in colocation_holdouts(perf, registry)],
        "freezing": [asdict(h) for h in freezing.holdout(perf)],
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}%"


def print_report(report: ModelReport, console: Console) -> None:
    types = Table(title=f"Energy-optimal cap per GPU type (parameters {report['params_id']}): medians over "
                        "job types, one GPU, against full power")
    for col in ("GPU", "board W", "cap", "cap W", "energy saved", "time added", "model"):
        types.add_column(col, justify="left" if col in ("GPU", "model") else "right")
    for o in report["gpu_types"]:
        types.add_row(o["gpu"], f"{o['board_min_w']:.0f}-{o['board_max_w']:.0f}", f"{o['cap_fraction']:.2f}",
                      f"{o['cap_fraction'] * o['board_max_w']:.0f}", _pct(o["energy_saved"]), _pct(o["time_added"]),
                      "ASSUMED (board limits)" if o["assumed"] else "fitted")
    console.print(types)

    table = Table(title="Held-out error (MAPE); naive = linear scaling / cap-oblivious, power = cap x TDP")
    for col in ("source", "model", "rows", "throughput", "naive", "power", "naive power"):
        table.add_column(col, justify="left" if col in ("source", "model") else "right", no_wrap=col == "model")
    rows = report["holdout"] + report["pooled"]
    for i, h in enumerate(rows):
        if i == len(report["holdout"]):
            table.add_section()
        table.add_row(h["source"], h["model"], str(h["rows"]), _pct(h["throughput_mape"]),
                      _pct(h["throughput_naive_mape"]), _pct(h["power_mape"]), _pct(h["power_naive_mape"]))
    console.print(table)

    caps = Table(title="Energy-optimal power cap in the sweeps (Zeus, H100): medians over measured jobs")
    for col in ("GPU", "which sweeps", "sweeps", "energy saved", "time added"):
        caps.add_column(col, justify="left" if col in ("GPU", "which sweeps") else "right")
    for gpu, kinds in report["energy_optimal_cap"].items():
        for kind, s in kinds.items():
            caps.add_row(gpu, kind, f"{s['jobs']}/{s['of']}", _pct(s.get("median_energy_saved")),
                         _pct(s.get("median_time_added")))
    console.print(caps)

    freq = Table(title="Energy-optimal SM clock (Perseus, GPT-3 stages, one micro-batch)")
    for col in ("GPU", "clock MHz", "energy saved", "time added"):
        freq.add_column(col, justify="left" if col == "GPU" else "right")
    for o in report["frequency_optimum"]:
        freq.add_row(o["gpu"], f"{o['best_setting']:.0f}", _pct(o["energy_saved"]), _pct(o["time_added"]))
    console.print(freq)

    coloc = Table(title="Co-location load model on held-back pairs (MAPE); naive = the other pairs' median "
                        "slowdown, the heavier job's power alone; optimistic = predicted > 5 % under measured; "
                        "wrongly shared = predicted within 1.25, measured beyond")
    for col in ("held back", "pairs", "slowdown", "naive", "optimistic", "wrongly shared", "power", "naive power"):
        coloc.add_column(col, justify="left" if col == "held back" else "right", no_wrap=col == "held back")
    for e in report["colocation"]:
        coloc.add_row(e["source"], str(e["pairs"]), _pct(e["slowdown_mape"]), _pct(e["slowdown_naive_mape"]),
                      _pct(e["optimistic"]), str(e["wrongly_shared"]), _pct(e["power_mape"]),
                      _pct(e["power_naive_mape"]))
    console.print(coloc)

    frozen = Table(title="Layer freezing on held-back rows (MAPE); a held-back workload gets the unknown-type "
                         "default; naive = freezing changes nothing; by parameters = the same model on the frozen "
                         "share of parameters")
    for col in ("held back", "rows", "steps/s", "naive", "by parameters", "J/step", "naive J/step"):
        frozen.add_column(col, justify="left" if col == "held back" else "right", no_wrap=col == "held back")
    for h in report["freezing"]:
        frozen.add_row(h["scheme"], str(h["rows"]), _pct(h["steps_mape"]), _pct(h["steps_naive_mape"]),
                       _pct(h["steps_param_share_mape"]), _pct(h["energy_mape"]), _pct(h["energy_naive_mape"]))
    console.print(frozen)


@click.group("models")
def models() -> None:
    """Throughput and energy models of DL jobs."""


@models.command("report")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--data", "--data-dir", "data_dir", type=click.Path(file_okay=False), help=DATA_HELP)
@click.option("--params", type=click.Path(dir_okay=False), help="Parameter file (default: the packaged one).")
@click.option("--corrections", type=click.Path(exists=True, dir_okay=False),
              help="The controller's corrections file ([controller] model_corrections): adds the GPU types its "
                   "nodes reported, unprofiled ones on their conservative board model.")
def report(as_json: bool, data_dir: str | None, params: str | None, corrections: str | None) -> None:
    """Each GPU type's energy-optimal cap, every model's error on rows held back from its fit,
    and the energy-optimal caps and clocks in the data."""
    perf, registry = require_perf(data_dir), load_registry(params, corrections)
    if as_json:
        click.echo(json.dumps(build_report(perf, registry), indent=1, default=float))
        return
    console = Console()
    with Progress(console=console, transient=True) as progress:
        result = build_report(perf, registry, progress)
    print_report(result, console)


@models.command("fit")
@click.option("--data", "--data-dir", "data_dir", type=click.Path(file_okay=False), help=DATA_HELP)
@click.option("--out", type=click.Path(dir_okay=False, writable=True), required=True,
              help="Write the fitted parameters (JSON) here; point $SLURM_GREEN_MODEL_PARAMS at it.")
def fit(data_dir: str | None, out: str) -> None:
    """Fit every (job type, GPU type) from the profiles; the only way parameters change."""
    from slurm_green.models.fit import fit_all

    perf = require_perf(data_dir)
    if not Path(out).resolve().parent.is_dir():
        raise click.ClickException(f"--out {out}: no such directory")
    params = fit_all(perf)
    params.save(out)
    click.echo(f"wrote parameters {params.params_id} ({len(params.types)} GPU types x "
               f"{len(params.types[params.primary].jobs)} job types) to {out}")


@models.command("show")
@click.option("--params", type=click.Path(dir_okay=False), help="Parameter file (default: the packaged one).")
def show(params: str | None) -> None:
    """Which parameters a controller would load: their id, GPU types and boards."""
    registry = load_registry(params)
    click.echo(f"parameters {registry.params_id} ({registry.params.meta.get('fitted_from', '?')}, "
               f"data {registry.params.meta.get('data_sha256', '?')})")
    for gpu in registry.gpu_types:
        board = registry.type_params(gpu)[0].gpu
        caps = registry.allowed_caps(gpu)
        click.echo(f"  {gpu:5} board {board.tdp_w * board.cap_min:.0f}-{board.tdp_w:.0f} W, idle {board.idle_w:.0f} W,"
                   f" caps {caps[0]:.2f}..1.00 in {len(caps)} steps")
