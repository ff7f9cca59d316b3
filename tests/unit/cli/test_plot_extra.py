"""matplotlib is the ``plots`` extra: ``--plot`` without it says how to get it, and nothing else needs it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from slurm_green.cli import main

PLOT_COMMANDS = [["carbon", "show"], ["report"], ["simulate"]]


@pytest.mark.parametrize("command", PLOT_COMMANDS, ids=" ".join)
def test_plot_without_matplotlib_is_one_line_naming_the_extra(command, monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    result = CliRunner().invoke(main, [*command, "--plot", str(tmp_path / "x.png")])
    assert result.exit_code == 2
    [line] = [x for x in result.output.splitlines() if x.startswith("Error:")]
    assert line.endswith("plots need matplotlib, which is not installed: pip install 'slurm-green[plots]'")
    assert not (tmp_path / "x.png").exists()


def test_the_controller_and_the_hooks_import_without_matplotlib_or_nvml() -> None:
    """What a head node (no [plots]) and a node (maybe no [nvml]) import at start."""
    code = (
        "import sys\n"
        "sys.modules['matplotlib'] = None; sys.modules['pynvml'] = None\n"
        "import slurm_green.cli, slurm_green.cli.controller, slurm_green.controller.daemon\n"
        "import slurm_green.gpu.prolog, slurm_green.gpu.epilog\n"
        "from click.testing import CliRunner\n"
        "r = CliRunner().invoke(slurm_green.cli.main, ['run', '--help'])\n"
        "assert r.exit_code == 0, r.output\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
