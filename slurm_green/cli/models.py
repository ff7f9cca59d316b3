"""``slurm-green models``: inspect and fit the throughput/energy models."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from slurm_green.models import evaluation, profiles
from slurm_green.models.data_paths import has_perf_energy, perf_energy_dir


def require_perf(data_dir: str | None) -> Path:
    perf = perf_energy_dir(Path(data_dir) if data_dir else None)
    if not has_perf_energy(perf.parent):
        raise click.ClickException(f"no profile data under {perf} (set SLURM_GREEN_DATA or --data-dir)")
    return perf


def build_report(perf: Path, progress: Progress | None = None) -> dict[str, object]:
    steps = ["gavel", "pollux", *profiles.ZEUS_MAX_LIMIT_W, "optima"]
    task = progress.add_task("held-out fits", total=len(steps)) if progress else None
    holdouts: list[evaluation.HoldoutError] = []
    for step in steps[:-1]:
        if step == "gavel":
            holdouts += evaluation.gavel_holdout(perf)
        elif step == "pollux":
            holdouts += evaluation.pollux_holdout(perf)
        else:
            holdouts += evaluation.cap_holdout(perf, step)
        if progress and task is not None:
            progress.advance(task)
    measured, modelled = evaluation.energy_optimal_caps(perf), evaluation.model_optimal_caps(perf)
    optima = {}
    for gpu in (None, *profiles.ZEUS_MAX_LIMIT_W):
        pick = lambda rows: [o for o in rows if gpu is None or o.gpu == gpu]  # noqa: E731
        optima[gpu or "all"] = {
            "measured_all_sweeps": evaluation.summarise_optima(pick(measured)),
            "measured_cap_bound": evaluation.summarise_optima(pick(measured), only_cap_bound=True),
            "model_cap_bound": evaluation.summarise_optima(pick(modelled), only_cap_bound=True),
        }
    if progress and task is not None:
        progress.advance(task)
    return {
        "holdout": [asdict(h) for h in holdouts],
        "pooled": [asdict(evaluation.pooled(holdouts, p)) for p in ("gavel", "pollux", "zeus")],
        "energy_optimal_cap": optima,
        "frequency_optimum": [asdict(o) for o in evaluation.frequency_optimum(perf)],
    }


def _pct(value: object) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}%"  # type: ignore[arg-type]


def print_report(report: dict[str, object], console: Console) -> None:
    table = Table(title="Held-out error (MAPE); naive = linear scaling / cap-oblivious, power = cap x TDP")
    for col in ("source", "model", "rows", "throughput", "naive", "power", "naive power"):
        table.add_column(col, justify="left" if col in ("source", "model") else "right", no_wrap=col == "model")
    rows = report["holdout"] + report["pooled"]  # type: ignore[operator]
    for i, h in enumerate(rows):
        if i == len(report["holdout"]):  # type: ignore[arg-type]
            table.add_section()
        table.add_row(h["source"], h["model"], str(h["rows"]), _pct(h["throughput_mape"]),
                      _pct(h["throughput_naive_mape"]), _pct(h["power_mape"]), _pct(h["power_naive_mape"]))
    console.print(table)

    caps = Table(title="Energy-optimal power cap (Zeus): medians over (network, batch) sweeps")
    for col in ("GPU", "which sweeps", "sweeps", "energy saved", "time added"):
        caps.add_column(col, justify="left" if col in ("GPU", "which sweeps") else "right")
    for gpu, kinds in report["energy_optimal_cap"].items():  # type: ignore[union-attr]
        for kind, s in kinds.items():
            caps.add_row(gpu, kind, f"{s['jobs']}/{s['of']}", _pct(s.get("median_energy_saved")),
                         _pct(s.get("median_time_added")))
    console.print(caps)

    freq = Table(title="Energy-optimal SM clock (Perseus, GPT-3 stages, one micro-batch)")
    for col in ("GPU", "clock MHz", "energy saved", "time added"):
        freq.add_column(col, justify="left" if col == "GPU" else "right")
    for o in report["frequency_optimum"]:  # type: ignore[union-attr]
        freq.add_row(o["gpu"], f"{o['best_setting']:.0f}", _pct(o["energy_saved"]), _pct(o["time_added"]))
    console.print(freq)


@click.group("models")
def models() -> None:
    """Throughput and energy models of DL jobs."""


@models.command("report")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Overrides $SLURM_GREEN_DATA.")
def report(as_json: bool, data_dir: str | None) -> None:
    """Held-out errors of every fitted model, and the energy-optimal caps and clocks in the data."""
    perf = require_perf(data_dir)
    if as_json:
        click.echo(json.dumps(build_report(perf), indent=1, default=float))
        return
    console = Console()
    with Progress(console=console, transient=True) as progress:
        result = build_report(perf, progress)
    print_report(result, console)


@models.command("fit")
@click.option("--gpu", default="v100", type=click.Choice(list(profiles.GAVEL_GPUS)), show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), help="Write fitted parameters (JSON) here.")
@click.option("--write-builtin", is_flag=True, help="Regenerate the built-in parameter module (v100).")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Overrides $SLURM_GREEN_DATA.")
def fit(gpu: str, out: str | None, write_builtin: bool, data_dir: str | None) -> None:
    """Fit all job types; load the JSON later with default_registry(params_path=...)."""
    from slurm_green.models import builtin_params
    from slurm_green.models.fit import fit_all
    from slurm_green.models.params import render_builtin_module

    params = fit_all(require_perf(data_dir), gpu)
    if out:
        params.save(out)
        click.echo(f"wrote {len(params.jobs)} job types to {out}")
    if write_builtin:
        if gpu != "v100":
            raise click.ClickException("the built-in parameters are the v100 fit")
        Path(builtin_params.__file__).write_text(render_builtin_module(params))
        click.echo(f"regenerated {builtin_params.__file__}")
    if not out and not write_builtin:
        click.echo(json.dumps(params.to_dict(), indent=1))
