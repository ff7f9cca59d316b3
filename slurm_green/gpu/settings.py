"""Node-side settings of the GPU layer: a small KEY=VALUE file, overridden by the environment.

The file (default /etc/slurm-green/gpu.conf, or $SLURM_GREEN_GPU_CONF) uses the same
names as the environment, so a site can write either::

    SLURM_GREEN_GPU_BACKEND=auto          # auto | nvml | emulated | none
    SLURM_GREEN_GPU_EMULATED_STATE=/var/lib/slurm-green/gpus.json
    SLURM_GREEN_STATE_DIR=/var/lib/slurm-green
    SLURM_GREEN_DECISION_KEY=/etc/slurm-green/decision.key
    SLURM_GREEN_DEFAULT_CAP=none          # or a fraction of the board maximum, e.g. 0.8
    SLURM_GREEN_GPU_ENACTMENT=power_cap   # or gpu_freq: Slurm's --gpu-freq enacts decisions
    SLURM_GREEN_TELEMETRY_DIR=none        # or a directory the controller also reads (shared
                                          # filesystem): the Epilog leaves each job's metered
                                          # GPU energy there (slurm_green.core.telemetry)
    SLURM_GREEN_MPS_CONTROL=none          # or /usr/bin/nvidia-cuda-mps-control where the site
                                          # enables gres/mps: the hooks start and stop MPS (mps.py)
    SLURM_GREEN_GPU_NUMBERING=minor       # or index where gres.conf has AutoDetect=nvml: what a
                                          # number in SLURM_JOB_GPUS is (nvml.py)

``auto`` uses NVML when it initialises, else the emulated backend only if
SLURM_GREEN_GPU_EMULATED_STATE is set explicitly, else nothing (and says so).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from slurm_green.gpu.nvml import NUMBERINGS
from slurm_green.gpu.power import GpuError, PowerBackend

CONF_ENV = "SLURM_GREEN_GPU_CONF"
DEFAULT_CONF = "/etc/slurm-green/gpu.conf"
BACKENDS = ("auto", "nvml", "emulated", "none")
ENACTMENTS = ("power_cap", "gpu_freq")


@dataclass(frozen=True, slots=True)
class GpuSettings:
    backend: str = "auto"
    emulated_state: Path = Path("/var/lib/slurm-green/gpus.json")
    emulated_state_explicit: bool = False
    state_dir: Path = Path("/var/lib/slurm-green")
    key_file: Path = Path("/etc/slurm-green/decision.key")
    default_cap: float | None = None
    enactment: str = "power_cap"
    telemetry_dir: Path | None = None
    mps_control: Path | None = None
    numbering: str = "minor"

    @property
    def jobs_dir(self) -> Path:
        return self.state_dir / "jobs"


def _read_conf(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    try:
        text = path.read_text()
    except FileNotFoundError:
        return values
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        name, sep, value = line.partition("=")
        if sep:
            values[name.strip().removeprefix("export ").strip()] = value.strip().strip("'\"")
    return values


def _values(environ: Mapping[str, str]) -> dict[str, str]:
    values = _read_conf(Path(environ.get(CONF_ENV, DEFAULT_CONF)))
    values.update({k: v for k, v in environ.items() if k.startswith("SLURM_GREEN_")})
    return values


def load_settings(environ: Mapping[str, str] = os.environ) -> GpuSettings:
    """Settings from the file, then the environment; raises ValueError on a bad value."""
    values = _values(environ)
    defaults = GpuSettings()
    backend = values.get("SLURM_GREEN_GPU_BACKEND", defaults.backend).strip().lower()
    if backend not in BACKENDS:
        raise ValueError(f"SLURM_GREEN_GPU_BACKEND={backend!r}: expected one of {', '.join(BACKENDS)}")
    enactment = values.get("SLURM_GREEN_GPU_ENACTMENT", defaults.enactment).strip().lower()
    if enactment not in ENACTMENTS:
        raise ValueError(f"SLURM_GREEN_GPU_ENACTMENT={enactment!r}: expected one of {', '.join(ENACTMENTS)}")
    cap_text = values.get("SLURM_GREEN_DEFAULT_CAP", "none").strip().lower()
    default_cap = None if cap_text in ("", "none") else float(cap_text)
    if default_cap is not None and not 0 < default_cap <= 1:
        raise ValueError(f"SLURM_GREEN_DEFAULT_CAP={cap_text!r}: expected none or a fraction in (0, 1]")
    numbering = values.get("SLURM_GREEN_GPU_NUMBERING", defaults.numbering).strip().lower()
    if numbering not in NUMBERINGS:
        raise ValueError(f"SLURM_GREEN_GPU_NUMBERING={numbering!r}: expected one of {', '.join(NUMBERINGS)}")
    emulated = values.get("SLURM_GREEN_GPU_EMULATED_STATE")
    return GpuSettings(
        backend=backend,
        emulated_state=Path(emulated) if emulated else defaults.emulated_state,
        emulated_state_explicit=bool(emulated),
        state_dir=Path(values.get("SLURM_GREEN_STATE_DIR", defaults.state_dir)),
        key_file=Path(values.get("SLURM_GREEN_DECISION_KEY", defaults.key_file)),
        default_cap=default_cap,
        enactment=enactment,
        telemetry_dir=_optional_path(values.get("SLURM_GREEN_TELEMETRY_DIR", "none")),
        mps_control=_optional_path(values.get("SLURM_GREEN_MPS_CONTROL", "none")),
        numbering=numbering,
    )


def jobs_dir(environ: Mapping[str, str]) -> Path:
    """Where the job records are, even where another setting is bad or the file cannot be read
    (``SLURM_GREEN_STATE_DIR`` then from the environment, else the default): an Epilog that
    failed must still mark its job ended there (epilog.py), as the wrapper's fallback does."""
    try:
        values = _values(environ)
    except (OSError, ValueError):  # unreadable, or not UTF-8
        values = dict(environ)
    return GpuSettings(state_dir=Path(values.get("SLURM_GREEN_STATE_DIR", GpuSettings().state_dir))).jobs_dir


def _optional_path(text: str) -> Path | None:
    text = text.strip()
    return None if text.lower() in ("", "none") else Path(text)


def open_backend(settings: GpuSettings) -> tuple[PowerBackend | None, str]:
    """The backend the settings ask for, or None with the reason (nothing is then changed)."""
    if settings.backend == "none":
        return None, "GPU power control disabled (SLURM_GREEN_GPU_BACKEND=none)"
    if settings.backend == "emulated":
        from slurm_green.gpu.emulated import EmulatedBackend

        return EmulatedBackend(settings.emulated_state), f"emulated GPUs in {settings.emulated_state}"
    from slurm_green.gpu.nvml import NvmlBackend

    try:
        backend = NvmlBackend(numbering=settings.numbering)
        return backend, backend.described
    except GpuError as exc:
        if settings.backend == "nvml":
            return None, f"NVML requested but unusable: {exc}"
        if settings.emulated_state_explicit:
            from slurm_green.gpu.emulated import EmulatedBackend

            return EmulatedBackend(settings.emulated_state), f"emulated GPUs in {settings.emulated_state} ({exc})"
        return None, f"no GPU power control: {exc}; set SLURM_GREEN_GPU_EMULATED_STATE to emulate"
