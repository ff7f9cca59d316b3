"""``slurm-green budget``: each period's carbon (energy) budget against what managed jobs spent.

Read-only, from the controller's store: what ``account_usage`` accounted per quarter hour
(the GPUs' modelled energy while jobs ran, or the Epilog-corrected models; carbon at the
grid's intensity then), summed over the periods ``[budget]`` defines. The current period
also shows the pace the controller plans at (``controller/budget.py``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from slurm_green.cli.errors import CliError
from slurm_green.cli.timefmt import iso, local_time_option, stamp
from slurm_green.controller.assemble import build_budget
from slurm_green.controller.config import DEFAULT_PATH, load_config
from slurm_green.controller.store import StateStore


@click.command("budget")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=DEFAULT_PATH, show_default=True,
              help="Controller configuration (TOML) with a [budget] section.")
@click.option("--periods", type=click.IntRange(1, 366), default=7, show_default=True,
              help="How many periods back, the current one included.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (times as POSIX seconds).")
@local_time_option
def budget(config_path: Path, periods: int, as_json: bool, local_time: bool) -> None:
    """Each period's budget, what was spent and whether it held."""
    config = load_config(config_path)
    period_budget = build_budget(config)
    if period_budget is None:
        raise CliError(f"{config_path}: no [budget] limit (carbon_kg for greenflow, energy_kwh for powerflow)")
    now = time.time()
    store = StateStore(config.controller.state_db, read_only=True)
    try:
        history = period_budget.history(store, now, periods)
    finally:
        store.close()
    rows = [{"start": s.start, "end": s.end, "limit": s.limit, "spent": round(s.spent, 6), "jobs": s.jobs,
             "share": round(s.spent / s.limit, 4), "held": s.spent <= s.limit, "current": s.end > now}
            for s in history]
    current = history[-1]
    if as_json:
        click.echo(json.dumps({"resource": current.resource, "unit": current.unit, "period": period_budget.period,
                               "timezone": config.budget.timezone, "periods": rows,
                               "current_scale": round(current.scale, 4)}, indent=2))
        return
    table = Table(title=f"slurm-green: {current.resource} budget per {period_budget.period} "
                        f"({config.budget.timezone}), {current.limit:g} {current.unit}")
    for column in ("period from", "to", f"spent {current.unit}", "of limit", "jobs", "held"):
        table.add_column(column)
    for row, status in zip(rows, history):
        held = "so far" if row["current"] and row["held"] else "yes" if row["held"] else "NO"
        table.add_row(stamp(status.start, local_time), stamp(status.end, local_time), f"{status.spent:.4g}",
                      f"{row['share']:.0%}", str(status.jobs), held)
    Console().print(table)
    click.echo(f"now: {current.note(now)} (ends {iso(current.end, local_time)})")
    periods_held = sum(bool(r["held"]) for r in rows[:-1])
    if len(rows) > 1:
        click.echo(f"held in {periods_held} of {len(rows) - 1} ended period(s)")
