"""``slurm-green sbatch``: render (and optionally submit) a green training job script."""

from __future__ import annotations

import difflib
import subprocess
import sys
from typing import Any

import click

from slurm_green.core.green_options import GreenOptionError
from slurm_green.jobscript import TrainingJob, render_sbatch


#: sbatch answers in well under a second; a minute means slurmctld is not answering.
SBATCH_TIMEOUT_S = 60


def _gpu_range(text: str | None) -> tuple[int | None, int | None]:
    if text is None:
        return None, None
    low, _, high = text.partition("-")
    try:
        return int(low), int(high or low)
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected MIN-MAX, e.g. 2-8", param_hint="--gpus-range") from None


def _script_not_an_option(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """SCRIPT as typed, unless it starts with ``-``.

    ``ignore_unknown_options`` lets the options after SCRIPT reach it as its own
    (``train.py --lr 0.1``), but it also turns a mistyped option before SCRIPT into SCRIPT:
    ``--gpu 4 train.py`` rendered a 1-GPU job running ``--gpu``, which failed only when the
    job started, possibly hours later after a green deferral. No script is named like an
    option (``./-name`` reaches one that is), so such a SCRIPT is a usage error (exit 2)."""
    if not value.startswith("-"):
        return value
    names = sorted(name for p in ctx.command.params for name in (*p.opts, *p.secondary_opts) if name.startswith("--"))
    close = difflib.get_close_matches(value.partition("=")[0], names, n=1)
    raise click.UsageError(
        f"SCRIPT {value!r} looks like an option, not a script"
        + (f" (did you mean {close[0]}?)" if close else "")
        + f"; options of slurm-green sbatch: {', '.join(names)}; the script's own options go after SCRIPT "
          "(or after --, for one named like ours), and a script whose name starts with '-' as ./NAME", ctx)


@click.command("sbatch", context_settings={"ignore_unknown_options": True})
@click.argument("script", callback=_script_not_an_option)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--name", default="train", show_default=True, help="Slurm job name (also the model type hint).")
@click.option("--gpus", "gpus_per_node", type=click.IntRange(min=1), default=1, show_default=True, help="GPUs per node requested.")
@click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True, help="Nodes; more than one uses srun + torchrun rendezvous.")
@click.option("--gpus-range", help="Total GPUs slurm-green may choose from, e.g. 2-8 (elastic jobs).")
@click.option("--flex", help="Maximum start delay slurm-green may use, e.g. 6h or 1d.")
@click.option("--time", help="Time limit, Slurm format (HH:MM:SS).")
@click.option("--partition", help="Slurm partition.")
@click.option("--cap/--no-cap", "accept_cap", default=True, show_default=True, help="Accept a GPU power cap.")
@click.option("--share/--no-share", "accept_share", default=False, show_default=True, help="Accept a shared GPU.")
@click.option("--elastic/--no-elastic", default=False, show_default=True,
              help="Let the controller checkpoint and requeue the running job at another GPU count within "
                   "--gpus-range (green:elastic=requeue); SCRIPT must checkpoint on its signal and resume "
                   "(slurm_green.train does), and the site must have enabled [elastic].")
@click.option("--submit", is_flag=True, help="Pipe the script to sbatch instead of printing it.")
def sbatch(script: str, args: tuple[str, ...], gpus_range: str | None, submit: bool, **fields: Any) -> None:
    """Render an sbatch script that runs SCRIPT with torchrun on the GPUs Slurm grants."""
    gpus_min, gpus_max = _gpu_range(gpus_range)
    job = TrainingJob(script=script, args=args, gpus_min=gpus_min, gpus_max=gpus_max, **fields)
    try:
        text = render_sbatch(job)
    except (ValueError, GreenOptionError) as exc:
        raise click.UsageError(str(exc)) from None
    if not submit:
        click.echo(text, nl=False)
        return
    try:
        result = subprocess.run(["sbatch"], input=text, text=True, capture_output=True, timeout=SBATCH_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = f"no answer within {SBATCH_TIMEOUT_S} s" if isinstance(exc, subprocess.TimeoutExpired) else exc.strerror
        raise click.ClickException(f"cannot run sbatch ({reason}); submit from a Slurm login node, or leave out "
                                   "--submit and pipe the printed script to sbatch yourself") from None
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    sys.exit(result.returncode)
