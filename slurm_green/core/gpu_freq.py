"""A power-cap decision expressed as Slurm's ``--gpu-freq`` level, for sites that enact
decisions through ``TresFreq`` (slurmd's gpu/nvml plugin sets the clocks at each step)
instead of NVML power limits set by the Prolog.

Slurm's levels are clocks, not watts (``low`` = the board's lowest clock, ``medium`` =
the middle one, ``highm1`` = one step below the highest, ``high`` = the highest), so
the mapping is coarse: each level stands for the cap fraction it roughly gives on a
data-centre GPU. A decision gets the lowest level whose fraction is at least the
decided cap, so that a job is never slowed more than the policy meant.
"""

from __future__ import annotations

from typing import Literal

#: How a cap decision reaches the GPUs: the Prolog's NVML limit (from the signed token),
#: or Slurm's ``TresFreq`` (``--gpu-freq``) set on the pending job.
Enactment = Literal["power_cap", "gpu_freq"]

#: (level, cap fraction it stands for), in rising order.
LEVELS: tuple[tuple[str, float], ...] = (("low", 0.5), ("medium", 0.7), ("highm1", 0.9), ("high", 1.0))


def level_for_cap(cap_fraction: float) -> str:
    """The ``--gpu-freq`` level that enacts a cap of ``cap_fraction`` of the board maximum."""
    return next((level for level, fraction in LEVELS if fraction >= cap_fraction - 1e-9), "high")


def cap_for_level(level: str) -> float:
    """The cap fraction a level stands for (unknown levels and explicit MHz: no cap)."""
    return dict(LEVELS).get(level, 1.0)


def tres_freq(cap_fraction: float) -> str:
    """The ``TresFreq`` value for a cap decision, as ``scontrol update`` takes it."""
    return f"gpu:{level_for_cap(cap_fraction)}"


def level_of(tres_freq_value: str) -> str | None:
    """The GPU level in a job's ``tres_freq`` (``gpu:medium`` -> ``medium``), or ``None``."""
    for part in (tres_freq_value or "").split(";"):
        kind, _, value = part.partition(":")
        if kind.strip() == "gpu" and value:
            return value.split(",")[0].strip()
    return None
