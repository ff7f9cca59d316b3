"""``python3 -m slurm_green.gpu.check``: this node's GPUs as its Prolog and Epilog see them.

Run as root on a compute node after installing (standard library and nvidia-ml-py only, like
the hooks). It prints the settings it finds (gpu.conf, then the ``SLURM_GREEN_*`` variables of
its own environment: the hooks get slurmd's, so set there what slurmd sets) and, through
NVML, each GPU's NVML index, /dev/nvidiaN minor, the number the hooks take Slurm to give it
(``SLURM_GREEN_GPU_NUMBERING``), its PCI bus id, board and power limits. Where NVML's index and the minor number differ it says which gres.conf each setting
fits: the one thing that makes the Prolog cap another job's GPU (docs/enactment.md).
Changes nothing. Exit status: 0 when GPU power control works here, 1 when it does not,
2 for a bad setting.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

from slurm_green.gpu.nvml import NUMBERING_RULE, NvmlBackend
from slurm_green.gpu.power import GpuError
from slurm_green.gpu.settings import CONF_ENV, DEFAULT_CONF, load_settings, open_backend


def check(environ: Mapping[str, str], out: TextIO) -> int:
    try:
        settings = load_settings(environ)
    except (OSError, ValueError) as exc:
        print(f"bad setting: {exc}", file=out)
        return 2
    print(f"settings ({environ.get(CONF_ENV, DEFAULT_CONF)}, then the environment): backend={settings.backend}, "
          f"numbering={settings.numbering}, enactment={settings.enactment}", file=out)
    backend, how = open_backend(settings)
    print(f"GPU power control: {how if backend is not None else 'none: ' + how}", file=out)
    if backend is None:
        return 1
    try:
        if isinstance(backend, NvmlBackend):
            _nvml_table(backend, out)
    finally:
        backend.close()
    return 0


def _nvml_table(backend: NvmlBackend, out: TextIO) -> None:
    print(f"{'slurm':>5} {'index':>5} {'minor':>5}  {'PCI bus id':<16} {'limits W (min/default/max, now)':<32} board",
          file=out)
    for index, minor in backend.devices:
        number = backend.number_of(index, minor)
        try:
            limits = backend.limits(number)
            watts = f"{limits.min_w:g}/{limits.default_w:g}/{limits.max_w:g}, {limits.current_w:g}"
            bus, board = backend.pci_bus_id(number), backend.model(number)
        except GpuError as exc:
            watts, bus, board = "?", "?", str(exc)
        print(f"{number:>5} {index:>5} {minor:>5}  {bus:<16} {watts:<32} {board}", file=out)
    for unopened in backend.unopened:
        print(f"not opened: {unopened}", file=out)
    if backend.renumbered:
        print(f"NVML's index and the minor number differ on this node: {NUMBERING_RULE}; "
              f"in force: {backend.numbering}", file=out)
    else:
        print("NVML's index and the minor number agree on this node: either numbering caps the same GPUs", file=out)


def main(environ: Mapping[str, str] | None = None, out: TextIO = sys.stdout) -> int:
    return check(os.environ if environ is None else environ, out)


if __name__ == "__main__":
    sys.exit(main())
