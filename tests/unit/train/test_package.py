"""``slurm_green.train`` works without PyTorch: only the adapter module imports it."""

from __future__ import annotations

import subprocess
import sys


def test_the_torch_free_modules_import_no_torch() -> None:
    code = ("import sys, slurm_green.train, slurm_green.train.progress, slurm_green.train.signals, "
            "slurm_green.train.freeze, slurm_green.train.plan, slurm_green.train.checkpoint; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
