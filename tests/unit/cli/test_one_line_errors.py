"""Every command's failures as a new admin meets them: one line saying what is wrong and what to do, exit 1.

Slurm is absent for real here: PATH holds an empty folder, so ``squeue`` and ``sbatch``
cannot be started, as on a laptop or a node without Slurm's client.
"""

from __future__ import annotations

import subprocess
import sys
import pytest
from click.testing import CliRunner, Result

from cli_setup import no_slurm, write_config

from slurm_green.cli import main
from slurm_green.cli.errors import EXIT_BUG, describe
from slurm_green.slurm.errors import SlurmError

def error_line(result: Result) -> str:
    """The one ``Error:`` line, asserting there is exactly one and no traceback."""
    assert "Traceback" not in result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    return line


@pytest.mark.parametrize("command", [["plan"], ["plan", "--json"], ["run", "--once", "--allow-root"]])
def test_without_slurm_a_command_says_so_in_one_line(tmp_path, command):
    config = write_config(tmp_path)
    result = CliRunner().invoke(main, [*command, "--config", str(config)], env=no_slurm(tmp_path))
    assert result.exit_code == 1
    line = error_line(result)
    assert "cannot read Slurm" in line and "cannot run squeue" in line and "on PATH" in line


def test_debug_shows_the_traceback(tmp_path):
    config = write_config(tmp_path)
    result = CliRunner().invoke(main, ["--debug", "plan", "--config", str(config)], env=no_slurm(tmp_path))
    assert result.exit_code == 1 and isinstance(result.exception, SlurmError)


def test_the_installed_entry_point_prints_one_line_and_no_traceback(tmp_path):
    config = write_config(tmp_path)
    done = subprocess.run([sys.executable, "-m", "slurm_green.cli", "plan", "--config", str(config)],
                          capture_output=True, text=True, timeout=120, env=no_slurm(tmp_path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("Error:")] == [
        next(line for line in done.stderr.splitlines() if "cannot read Slurm" in line)]
    debug = subprocess.run([sys.executable, "-m", "slurm_green.cli", "--debug", "plan", "--config", str(config)],
                           capture_output=True, text=True, timeout=120, env=no_slurm(tmp_path))
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "SlurmError" in debug.stderr


def test_a_misspelt_source_kind_names_the_kinds(tmp_path):
    config = write_config(tmp_path, sources='["electricitymap:DE"]')
    result = CliRunner().invoke(main, ["plan", "--config", str(config)], env=no_slurm(tmp_path))
    assert result.exit_code == 1
    line = error_line(result)
    assert "'electricitymap:DE'" in line and "unknown source kind" in line and "electricitymaps" in line


def test_a_missing_token_is_said_in_one_line_naming_the_variable_the_service_reads(tmp_path):
    """The source fails as a source (the controller goes on carbon-agnostic), and the line says what to set."""
    config = write_config(tmp_path, sources='["electricitymaps:DE"]')
    result = CliRunner().invoke(main, ["plan", "--config", str(config)],
                                env={**no_slurm(tmp_path), "ELECTRICITYMAPS_TOKEN": "", "ELECTRICITYMAPS_TOKEN_FILE": ""})
    assert result.exit_code == 1 and "Traceback" not in result.output
    [said] = [line for line in result.output.splitlines() if line.startswith("carbon:")]
    assert "ELECTRICITYMAPS_TOKEN" in said
    assert "in config" not in said  # the config refuses such a key: the message must not offer it


def test_a_bad_config_is_one_line_naming_each_key(tmp_path):
    config = write_config(tmp_path, extra="[policy]\nname = \"nope\"\nbudget = 3\n")
    result = CliRunner().invoke(main, ["plan", "--config", str(config)])
    assert result.exit_code == 1
    line = error_line(result)
    assert "policy.name" in line and "policy.budget: unknown key" in line
    assert result.output.strip() == line


def test_sbatch_submit_without_sbatch(tmp_path):
    result = CliRunner().invoke(main, ["sbatch", "train.py", "--submit"], env=no_slurm(tmp_path))
    assert result.exit_code == 1
    line = error_line(result)
    assert "cannot run sbatch" in line and "leave out --submit" in line


def test_an_unexpected_exception_is_called_a_bug_with_its_own_exit_code():
    message, code = describe(ZeroDivisionError("division by zero"))
    assert code == EXIT_BUG == 70
    assert message.startswith("internal error ZeroDivisionError: division by zero") and "--debug" in message


def test_usage_errors_keep_clicks_exit_code():
    result = CliRunner().invoke(main, ["plan", "--nope"])
    assert result.exit_code == 2 and "No such option" in result.output


@pytest.mark.parametrize("args, said", [
    (["--gpus-range", "a-b"], "Invalid value for --gpus-range: 'a-b': expected MIN-MAX, e.g. 2-8"),
    (["--gpus", "0"], "Invalid value for '--gpus': 0 is not in the range x>=1"),
])
def test_sbatch_refuses_bad_sizes_naming_the_option(args, said):
    result = CliRunner().invoke(main, ["sbatch", "train.py", *args])
    assert result.exit_code == 2 and said in error_line(result)
