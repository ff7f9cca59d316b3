"""The ``slurm-green`` command line: one click group, one module per area."""

from __future__ import annotations

import click

from slurm_green import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="slurm-green")
def main() -> None:
    """Carbon- and energy-aware scheduling for Slurm GPU clusters."""
