"""``slurm-green install --print``: the snippets an admin pastes, and that the unit's command runs."""

from __future__ import annotations

import shlex
import subprocess

from click.testing import CliRunner

from slurm_green.cli import main


def test_print_names_every_piece_and_the_units_command_runs() -> None:
    result = CliRunner().invoke(main, ["install", "--print", "--gpus-per-node", "8"])
    assert result.exit_code == 0, result.output
    for piece in ("JobSubmitPlugins=lua", "PrologFlags=Alloc", "Prolog=", "Epilog=", "adminlevel=Operator",
                  "[Service]", "ExecStart="):
        assert piece in result.output, piece
    [exec_start] = [line for line in result.output.splitlines() if line.startswith("ExecStart=")]
    argv = shlex.split(exec_start.removeprefix("ExecStart="))
    assert argv[argv.index("run") + 1:] == ["--config", "/etc/slurm-green/config.toml"]
    # the same interpreter and module, asked for help instead of running the daemon
    done = subprocess.run([*argv[: argv.index("run")], "run", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--once" in done.stdout, done.stderr
