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
