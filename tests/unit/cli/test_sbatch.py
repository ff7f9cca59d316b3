"""``slurm-green sbatch``: the green options it writes into the rendered script's --comment."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from slurm_green.cli import main
from slurm_green.core.green_options import find_user_options, parse_user_options


def _comment_line(args: list[str]) -> str:
    result = CliRunner().invoke(main, ["sbatch", "train.py", *args])
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("#SBATCH --comment=")]
    return line.removeprefix("#SBATCH --comment=")


@pytest.mark.parametrize("args, elastic", [
    (["--gpus", "4", "--gpus-range", "1-4", "--elastic"], True),
    (["--gpus", "4", "--gpus-range", "1-4", "--no-elastic"], False),
    (["--gpus", "4", "--gpus-range", "1-4"], False),
])
def test_elastic_flag_writes_elastic_requeue(args, elastic):
    comment = _comment_line(args)
    text = find_user_options(comment)
    assert text is not None
    options = parse_user_options(text, math.inf)
    assert options.elastic is elastic and (options.gpus_min, options.gpus_max) == (1, 4)
    assert ("elastic=requeue" in comment) is elastic


def test_without_elastic_the_comment_is_as_before():
    assert _comment_line(["--flex", "6h", "--gpus-range", "2-8"]) == "green:flex=6h,gpus=2-8,cap=yes,share=no"


@pytest.mark.parametrize("args, hint", [(["--gpu", "4", "train.py"], "did you mean --gpus?"),
                                        (["--flex6h", "train.py"], "did you mean --flex?"),
                                        (["-g", "4", "train.py"], "as ./NAME")])
def test_a_mistyped_option_before_script_is_refused_not_run_as_script(args, hint):
    """ignore_unknown_options made ``--gpu 4 train.py`` a 1-GPU job running ``--gpu`` (exit 0)."""
    result = CliRunner().invoke(main, ["sbatch", *args])
    assert result.exit_code == 2, result.output
    assert f"SCRIPT {args[0]!r} looks like an option" in result.output and hint in result.output
    assert "--gpus-range" in result.output and not any(line.startswith("exec ") for line in result.output.splitlines())


def test_options_after_script_are_still_the_scripts_own():
    result = CliRunner().invoke(main, ["sbatch", "--gpus", "2", "train.py", "--lr", "0.1", "--", "--submit"])
    assert result.exit_code == 0, result.output
    [exec_line] = [line for line in result.output.splitlines() if line.startswith("exec ")]
    assert exec_line.endswith(" train.py --lr 0.1 --submit")
