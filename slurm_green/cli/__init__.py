"""The ``slurm-green`` command line: one click group, one module per area."""

from __future__ import annotations

import click

from slurm_green import __version__
from slurm_green.cli.errors import ErrorMappingGroup


@click.group(cls=ErrorMappingGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="slurm-green")
@click.option("--debug", is_flag=True, help="On an error, show the full traceback instead of one line.")
def main(debug: bool) -> None:
    """Carbon- and energy-aware scheduling for Slurm GPU clusters."""


def _register() -> None:
    """Attach each area's commands (imported here to keep ``slurm-green --help`` one place)."""
    from slurm_green.cli.accounting import report
    from slurm_green.cli.budget import budget
    from slurm_green.cli.carbon import carbon
    from slurm_green.cli.controller import plan, run
    from slurm_green.cli.install import install
    from slurm_green.cli.models import models
    from slurm_green.cli.sbatch import sbatch
    from slurm_green.cli.sim import bench, simulate, whatif
    from slurm_green.cli.operations import pause, resume
    from slurm_green.cli.status import status
    from slurm_green.cli.when import when
    from slurm_green.cli.why import why

    for command in (run, plan, report, budget, status, why, when, pause, resume, carbon, models, simulate, bench, whatif,
                    sbatch, install):
        main.add_command(command)


_register()
