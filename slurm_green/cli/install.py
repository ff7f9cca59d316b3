"""``slurm-green install``: what an admin adds to the site, for this config.

``--print`` shows the snippets (nothing changes); ``--hooks DIR`` writes the Prolog and
Epilog wrappers into DIR (slurm_green/gpu/wrappers.py), which the printed slurm.conf
lines then name. Defaults follow the README's layout: the controller's venv at
``/opt/slurm-green/venv`` on the head node, the repository copy at ``/opt/slurm-green``
and the system ``/usr/bin/python3`` on nodes, the wrappers at
``/usr/local/libexec/slurm-green``; nothing is taken from the environment this command
happens to run in, so the output is the same wherever an admin runs it.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from slurm_green.controller.config import DEFAULT_PATH, Config, ConfigError, load_config
from slurm_green.gpu import wrappers
from slurm_green.gpu.nvml import gpu_models
from slurm_green.templates import render

SITE_TEMPLATES = ("site/install.sh.j2", "site/slurm.conf.j2", "site/gres.conf.j2", "site/slurm-green.service.j2",
                  "site/job_submit_chain.lua.j2")
_GRES_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# Words of NVML board names that say who made it, not which board it is.
_BRAND_WORDS = frozenset({"nvidia", "tesla", "geforce", "quadro", "rtx"})


def gres_type(model: str) -> str | None:
    """A short gres Type from an NVML name: "NVIDIA A100-SXM4-80GB" -> "a100"; None if none."""
    words = [w for w in model.lower().split() if w not in _BRAND_WORDS]
    kind = words[0].split("-")[0] if words else ""
    return kind if _GRES_TYPE.fullmatch(kind) else None


def _check_gpu_type(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not _GRES_TYPE.fullmatch(value):
        raise click.BadParameter(f"{value!r}: letters, digits, '_', '.', '-' (e.g. a100, h100, a40)")
    return value


@click.command("install")
@click.option("--print", "print_only", is_flag=True, help="Print the snippets (nothing is changed).")
@click.option("--hooks", "hooks_dir", type=click.Path(path_type=Path, file_okay=False),
              help=f"Write the Prolog and Epilog wrappers into this directory (on a node: {wrappers.HOOKS_DIR}).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=DEFAULT_PATH, show_default=True)
@click.option("--prefix", default="/opt/slurm-green", show_default=True,
              help="The repository copy on the nodes and the slurmctld host (the wrappers' PYTHONPATH).")
@click.option("--python", "python_bin", default="/opt/slurm-green/venv/bin/python", show_default=True,
              help="Head node: the interpreter slurm-green is installed for (the unit's ExecStart).")
@click.option("--node-python", default=wrappers.DEFAULTS.python, show_default=True,
              help="Compute nodes: the interpreter the Prolog/Epilog run.")
@click.option("--hook-timeout", type=click.IntRange(min=1), default=wrappers.DEFAULTS.timeout_s,
              show_default=True, help="Seconds before the wrappers stop their Python (PrologEpilogTimeout is 10 more).")
@click.option("--user", default="sgreen", show_default=True, help="Service user of the controller.")
@click.option("--account", default="ops", show_default=True, help="Slurm account of the service user.")
@click.option("--gpu-type", callback=_check_gpu_type,
              help="gres Type of the nodes' GPUs (e.g. a100); default: from NVML on this host, else none.")
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--shards-per-gpu", type=click.IntRange(min=1), default=4, show_default=True)
def install(print_only: bool, hooks_dir: Path | None, config_path: Path, prefix: str, python_bin: str,
            node_python: str, hook_timeout: int, user: str, account: str, gpu_type: str | None,
            gpus_per_node: int, shards_per_gpu: int) -> None:
    """Write the Prolog/Epilog wrappers, and show the slurm.conf/gres.conf lines, plugin, and systemd unit."""
    if not print_only and hooks_dir is None:
        raise click.UsageError("nothing to do: give --print, --hooks DIR, or both")
    try:
        hook_settings = wrappers.HookSettings(python=node_python, home=prefix, timeout_s=hook_timeout)
        config = load_config(config_path) if print_only else None
    except (ConfigError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if hooks_dir is not None:
        try:
            written = wrappers.install(hooks_dir, hook_settings)
        except OSError as exc:
            raise click.ClickException(f"cannot write the hooks into {hooks_dir}: {exc}") from None
        click.echo(f"# wrote {', '.join(str(p) for p in written)}", err=print_only)
    if config is None:
        return
    models = gpu_models() if gpu_type is None else []
    context = {
        "prefix": prefix, "user": user, "account": account, "gpus_per_node": gpus_per_node,
        "shards_per_gpu": shards_per_gpu, "hook_timeout_s": hook_timeout, "prolog_timeout_s": hook_timeout + 10,
        "config_path": config_path, "state_dir": config.controller.state_db.parent,
        "cache_dir": config.carbon.cache_dir, "key_file": config.controller.decision_key_file,
        "python_bin": python_bin, "node_python": node_python,
        "hooks_dir": hooks_dir or wrappers.HOOKS_DIR, "read_write_paths": read_write_paths(config),
        "gpu_type": gpu_type or (gres_type(models[0]) if len(set(models)) == 1 else None), "gpu_models": models,
        "dry_run": config.controller.dry_run, "telemetry_dir": config.controller.telemetry_dir,
        "progress_dir": config.progress_dir if config.elastic.requeue else None,
    }
    click.echo("\n".join(render(name, **context) for name in SITE_TEMPLATES))


def read_write_paths(config: Config) -> list[str]:
    """Every directory the controller writes, for ProtectSystem=strict; optional ones with ``-``."""
    paths = [str(config.controller.state_db.parent), str(config.carbon.cache_dir)]
    optional = [config.controller.telemetry_dir, config.progress_dir if config.elastic.requeue else None,
                config.controller.model_corrections.parent if config.controller.model_corrections else None]
    for path in optional:
        if path is not None and str(path) not in paths:
            paths.append(f"-{path}")
    return list(dict.fromkeys(paths))
