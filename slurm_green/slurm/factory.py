"""Choosing the Slurm backend: pyslurm when it can talk to this cluster, else the CLI.

pyslurm is compiled against one Slurm release and only works with the same
major.minor, and it talks to the local libslurm, so it is only a candidate when
commands run on this host. Every decision is logged with its reason.
"""

from __future__ import annotations

import importlib
import logging
import re
from types import ModuleType
from typing import Any, Literal

from slurm_green.core.backend import ClusterBackend
from slurm_green.core.clock import Clock
from slurm_green.slurm.cli_backend import CliBackend
from slurm_green.slurm.pyslurm_backend import PyslurmBackend
from slurm_green.slurm.runner import CommandRunner, CommandTimeout, CommandUnavailable, LocalRunner

log = logging.getLogger(__name__)

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")

Preference = Literal["auto", "cli", "pyslurm"]


def major_minor(version: str) -> str | None:
    """``"24.11"`` from ``"slurm-wlm 24.11.5"``, ``"24.11.5"`` or ``"24.11"``."""
    match = _VERSION.search(version or "")
    return f"{int(match.group(1))}.{int(match.group(2)):02d}" if match else None


def cluster_version(runner: CommandRunner, timeout_s: float = 10.0) -> str | None:
    """The Slurm version ``scontrol version`` reports (no slurmctld RPC), or ``None``."""
    try:
        result = runner.run(["scontrol", "version"], timeout=timeout_s)
    except (CommandTimeout, CommandUnavailable) as exc:
        log.warning("scontrol version failed: %s", exc)
        return None
    match = _VERSION.search(result.stdout) if result.ok else None
    return match.group(0) if match else None


def _import_pyslurm() -> ModuleType | None:
    try:
        return importlib.import_module("pyslurm")
    except Exception as exc:  # ImportError, or a libslurm that fails to load
        log.info("pyslurm is not usable here: %s", exc)
        return None


def make_backend(
    runner: CommandRunner | None = None,
    *,
    prefer: Preference = "auto",
    dry_run: bool = False,
    clock: Clock | None = None,
    timeout_s: float = 30.0,
    pyslurm_module: ModuleType | Any | None = None,
    text_jobs: bool = True,
    write_prefix: tuple[str, ...] = (),
) -> ClusterBackend:
    """The backend for this cluster: pyslurm if importable and of the cluster's major.minor.

    ``prefer="cli"`` skips pyslurm; ``prefer="pyslurm"`` raises ``RuntimeError`` if it
    cannot be used. ``pyslurm_module`` replaces ``import pyslurm`` (tests). ``text_jobs``:
    how the CLI backend reads jobs, ``write_prefix`` what runs its changes (see ``CliBackend``;
    the pyslurm backend cannot take a prefix, so with one the CLI backend is used).
    """
    runner = runner or LocalRunner()

    def cli(reason: str) -> CliBackend:
        if prefer == "pyslurm":
            raise RuntimeError(f"pyslurm backend requested but unusable: {reason}")
        log.info("Slurm backend: CLI (%s)", reason)
        return CliBackend(runner, clock=clock, timeout_s=timeout_s, dry_run=dry_run, text_jobs=text_jobs,
                          write_prefix=write_prefix)

    if prefer == "cli":
        return cli("asked for the CLI backend")
    if write_prefix:
        return cli(f"changes run through {' '.join(write_prefix)}, which pyslurm cannot do")
    if not getattr(runner, "is_local", False):
        return cli(f"commands run through {type(runner).__name__}; pyslurm can only reach a local libslurm")
    module = pyslurm_module or _import_pyslurm()
    if module is None:
        return cli("pyslurm is not installed")
    binding = major_minor(str(getattr(module, "version", lambda: "")()))
    cluster = major_minor(cluster_version(runner, timeout_s) or "")
    if cluster is None:
        return cli("could not read the cluster's Slurm version with scontrol version")
    if binding != cluster:
        return cli(f"pyslurm {binding} does not match Slurm {cluster}")
    log.info("Slurm backend: pyslurm (pyslurm %s matches Slurm %s)", binding, cluster)
    return PyslurmBackend(module, clock=clock, dry_run=dry_run)
