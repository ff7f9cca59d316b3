"""What a GPU power backend offers, in watts, addressed by /dev/nvidiaN minor number.

Slurm names a job's GPUs by minor number (SLURM_JOB_GPUS); NVML's own index order may
differ, so every backend is addressed by minor number and maps it itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol


class GpuError(RuntimeError):
    """A GPU could not be read or changed (driver error, unknown device, no permission)."""


@dataclass(frozen=True, slots=True)
class BoardLimits:
    """A board's power-limit range, its factory default and the limit now in force (W)."""

    min_w: float
    max_w: float
    default_w: float
    current_w: float

    def clamp(self, watts: float) -> float:
        return min(self.max_w, max(self.min_w, watts))


class PowerBackend(Protocol):
    name: str

    def limits(self, minor: int) -> BoardLimits: ...

    def set_limit(self, minor: int, watts: float) -> None:
        """Set the power limit; callers pass a value already clamped to the board's range."""
        ...

    def energy_j(self, minor: int) -> float | None:
        """Energy the board used since an arbitrary origin (telemetry), if known."""
        ...

    def close(self) -> None: ...


def cap_watts(fraction: float, limits: BoardLimits) -> float:
    """A cap given as a fraction of the board's maximum limit, clamped to its range (whole W)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not math.isfinite(fraction):
        raise ValueError(f"cap fraction must be a finite number, not {fraction!r}")
    if fraction <= 0:
        raise ValueError(f"cap fraction must be positive, not {fraction!r}")
    return limits.clamp(float(round(fraction * limits.max_w)))
