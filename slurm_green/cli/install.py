"""``slurm-green install --print``: what an admin adds to the site, for this config."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from slurm_green.controller.config import DEFAULT_PATH, ConfigError, load_config
from slurm_green.templates import render

SITE_TEMPLATES = ("site/install.sh.j2", "site/slurm.conf.j2", "site/gres.conf.j2", "site/slurm-green.service.j2")


@click.command("install")
@click.option("--print", "print_only", is_flag=True, required=True, help="Print the snippets (nothing is changed).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=DEFAULT_PATH, show_default=True)
@click.option("--prefix", default="/opt/slurm-green", show_default=True, help="Where the repository is installed.")
@click.option("--user", default="sgreen", show_default=True, help="Service user of the controller.")
@click.option("--account", default="root", show_default=True, help="Slurm account of the service user.")
@click.option("--gpus-per-node", type=int, default=8, show_default=True)
@click.option("--shards-per-gpu", type=int, default=4, show_default=True)
def install(print_only: bool, config_path: Path, prefix: str, user: str, account: str,
            gpus_per_node: int, shards_per_gpu: int) -> None:
    """Show the slurm.conf/gres.conf lines, plugin and Prolog installation, and systemd unit."""
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    context = {
        "prefix": prefix, "user": user, "account": account, "gpus_per_node": gpus_per_node,
        "shards_per_gpu": shards_per_gpu, "prolog_timeout_s": 30, "config_path": config_path,
        "state_dir": config.controller.state_db.parent, "cache_dir": config.carbon.cache_dir,
        "key_file": config.controller.decision_key_file, "python_bin": sys.executable,
    }
    click.echo("\n".join(render(name, **context) for name in SITE_TEMPLATES))
