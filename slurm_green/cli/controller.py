"""``slurm-green run`` (the daemon), ``run --once`` and ``plan`` (a dry run).

``run`` and ``run --once`` refuse to start beside a controller already running on the
same state database (``controller/single_instance.py``): two would both enact every tick.

``run`` refuses to start as root where that would leave root the owner of the state
files (the store, its WAL, the carbon cache, the lock): the service user could then no
longer write them, and the next ``systemctl start`` fails. It says to run as the service
user; ``--allow-root`` is for a site that runs the controller as root on purpose.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections import Counter
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from slurm_green.cli.errors import CliError
from slurm_green.controller.config import DEFAULT_PATH, Config, load_config
from slurm_green.controller.daemon import operated, run_forever
from slurm_green.controller.metrics import ControllerMetrics
from slurm_green.controller.single_instance import sole_controller
from slurm_green.controller.tick import TickReport
from slurm_green.core.actions import ActionError
from slurm_green.core.text import terminal_safe

config_option = click.option("--config", "config_path", type=click.Path(path_type=Path), default=DEFAULT_PATH,
                             show_default=True, help="Controller configuration (TOML).")
#: ``run --once`` exit code when the tick ran but actions failed (1 is "could not run at all").
EXIT_ACTIONS_FAILED = 3
#: Failures that are races, not faults: the job ended or started between the snapshot and the action.
_RACES = {ActionError.JOB_GONE, ActionError.NOT_PENDING}
_PERMISSION_HINT = "the controller's user needs Slurm operator rights or a write_prefix (docs/deploy.md)"


def _when(t: float | None, now: float) -> str:
    if t is None:
        return "-"
    stamp = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%m-%d %H:%M:%S")
    delta = (t - now) / 60
    return stamp if abs(delta) < 0.5 else f"{stamp} ({delta:+.0f} min)"


def root_would_own(config: Config) -> Path | None:
    """The first state file or folder that running as root would create or write, owned by
    someone else (or not there yet): ``None`` when root may run (not root, or root owns them)."""
    if os.geteuid() != 0:
        return None
    for path in (config.controller.state_db, config.controller.state_db.parent, config.carbon.cache_dir):
        if not path.exists() or path.stat().st_uid != 0:
            return path
    return None


def refuse_root(config: Config, allow_root: bool) -> None:
    """One line, before anything is created, when root would take the state files from the service user."""
    path = None if allow_root else root_would_own(config)
    if path is not None:
        raise CliError(f"running as root would leave {path} owned by root, which the service user then cannot "
                       "write; run as the service user (sudo -u sgreen slurm-green ...), or --allow-root if the "
                       "controller runs as root on purpose")


@click.command("run")
@config_option
@click.option("--once", is_flag=True, help="Run one tick and exit.")
@click.option("--allow-root", is_flag=True, help="Run as root even where root would then own the state files.")
def run(config_path: Path, once: bool, allow_root: bool) -> None:
    """Run the controller: a tick every controller.interval_s seconds."""
    from slurm_green.controller.assemble import assemble

    config = load_config(config_path)
    refuse_root(config, allow_root)
    logging.basicConfig(level=config.controller.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with sole_controller(config.controller.state_db):  # before the store opens: one controller per store
        parts = assemble(config)
        operated(parts.controller, config.controller.state_db)
        try:
            parts.feed.refresh()  # one bounded fetch before the first tick, so a cold start is not carbon-agnostic
        except Exception as exc:
            logging.getLogger(__name__).warning("first carbon fetch failed: %s", exc)
        if once:  # a failing tick raises, and the top level says why in one line
            failed = failed_actions(parts.controller.tick(parts.clock.now()))
            if failed:
                raise CliError(failed, EXIT_ACTIONS_FAILED)
            return
        metrics = ControllerMetrics()
        if config.controller.metrics_port:
            metrics.serve(config.controller.metrics_port)
        parts.feed.start()
        run_forever(parts.controller, parts.clock, config.controller.interval_s, metrics)


def failed_actions(report: TickReport) -> str | None:
    """One line when actions of the tick failed for a reason other than a race, else ``None``.

    Any such failure counts, not only "all failed": a job whose cap or start was not
    enacted runs other than decided, and ``--once`` is what scripts and checks run.
    """
    faults = [f for f in report.failures if f.error not in _RACES]
    if not faults:
        return None
    kinds = Counter(f.error.value if f.error else "other" for f in faults)
    first = faults[0]
    return (f"{len(faults)} of {len(report.results)} actions failed ("
            + ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common())
            + f"); first: job {first.action.job_id} {type(first.action).__name__}: {first.message or first.error}"
            + (f"; {_PERMISSION_HINT}" if ActionError.PERMISSION_DENIED.value in kinds else ""))


@click.command("plan")
@config_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plan(config_path: Path, as_json: bool) -> None:
    """What the controller would do now, and why (nothing is changed)."""
    from slurm_green.controller.assemble import assemble

    config = load_config(config_path)
    parts = assemble(config, dry_run=True, with_store=False)
    operated(parts.controller, config.controller.state_db)
    try:
        parts.feed.refresh()
    except Exception as exc:
        click.echo(f"carbon: {exc}", err=True)
    now = parts.clock.now()
    report, _ = parts.controller.decide(now)
    actions: dict[int, list[str]] = {}
    for action in report.actions:
        actions.setdefault(action.job_id, []).append(type(action).__name__)
    if as_json:
        click.echo(json.dumps({
            "now": now, "policy": parts.controller.policy.name, "carbon_source": report.carbon_source,
            "notes": report.notes,
            "decisions": [{
                "job_id": d.job_id, "start_at": d.start_at, "gpus_per_node": d.gpus_per_node,
                "num_nodes": d.num_nodes, "power_cap_fraction": d.power_cap_fraction, "gpu_type": d.gpu_type,
                "reason": d.reason,
                "expected_carbon_kg": d.expected_carbon_kg, "carbon_if_now_kg": d.carbon_if_now_kg,
                "actions": actions.get(d.job_id, []),
            } for d in report.plan.decisions],
        }, indent=2))
        return
    # reasons and notes can quote Slurm's and the sources' text: literal, terminal_safe Text, never rich markup
    table = Table(title=Text(terminal_safe(
        f"slurm-green plan ({parts.controller.policy.name}, carbon: {report.carbon_source or 'none'})")))
    for column in ("job", "start", "GPUs/node", "cap", "reason", "actions"):
        table.add_column(column)
    for d in report.plan.decisions:
        table.add_row(str(d.job_id), _when(d.start_at, now), str(d.gpus_per_node or "as asked"),
                      "-" if d.power_cap_fraction is None else f"{d.power_cap_fraction:.0%}",
                      Text(terminal_safe(d.reason)),
                      ", ".join(actions.get(d.job_id, [])) or "none (in force)")
    console = Console()
    console.print(table)
    for note in report.notes:
        console.print(Text(terminal_safe(f"note: {note}")))
