"""``slurm-green pause`` and ``resume``: the admin's off switch (``controller/daemon.py`` has the rule).

``pause`` turns the switch on and releases every managed pending job at once, with one
tick of its own that records nothing (run as root, it leaves only the switch file);
the running controller then keeps deferring nothing until ``resume``. Both work while
the controller is stopped too: the switch is read at every tick, the first one included.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from slurm_green.cli.caller import caller
from slurm_green.cli.controller import EXIT_ACTIONS_FAILED, config_option, failed_actions
from slurm_green.cli.errors import CliError
from slurm_green.controller.config import Config, load_config
from slurm_green.controller import daemon


def _switch(config_path: Path) -> tuple[Path, Config]:
    config = load_config(config_path)
    path = daemon.pause_path(config.controller.state_db)
    if not path.parent.is_dir():
        raise CliError(f"{path.parent} does not exist: no controller has run with state_db "
                       f"{config.controller.state_db} (check --config)")
    return path, config


@click.command("pause")
@config_option
@click.option("--reason", default="", help="Why, for the log, the metrics' readers and `slurm-green resume`.")
def pause(config_path: Path, reason: str) -> None:
    """Release every managed deferred job now, and defer nothing until `slurm-green resume`."""
    from slurm_green.controller.assemble import assemble

    path, config = _switch(config_path)
    now = time.time()
    daemon.pause(path, caller(), reason, now)
    parts = assemble(config, with_store=False)
    daemon.operated(parts.controller, config.controller.state_db)
    report = parts.controller.tick(now)
    released = ("(dry_run: nothing changed in Slurm)" if parts.controller.dry_run
                else f"{len(report.plan.decisions)} managed pending job(s) released now")
    click.echo(f"paused ({path}): {released}; the controller defers and caps nothing until `slurm-green resume`")
    failed = failed_actions(report)
    if failed:
        raise CliError(f"paused, but {failed}", EXIT_ACTIONS_FAILED)


@click.command("resume")
@config_option
def resume(config_path: Path) -> None:
    """Undo `slurm-green pause`: the next tick decides as configured again."""
    path, _ = _switch(config_path)
    record = daemon.paused_since(path)
    if record is None:
        click.echo("not paused: nothing to do")
        return
    path.unlink()
    click.echo(f"resumed (paused by {record.get('by', '?')}"
               + (f": {record['reason']}" if record.get("reason") else "")
               + "); the next tick decides as configured")
