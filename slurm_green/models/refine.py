"""Online refinement: nudge a job type's predictions toward what its jobs were measured doing.

A correction is a multiplicative factor kept in log space, per job type and per
configuration (GPUs, nodes, cap rounded to 0.05), plus a type-wide one used for
configurations never observed. Each observation moves the factor part of the way:
weight ``1/(n+1)`` (a running mean) but at most 0.5, so one noisy sample cannot
replace the fit, and at least 0.1, so the factor keeps tracking drift. Factors are
clamped to [1/4, 4]: telemetry can correct a model, not overrule it wholesale.

The same file keeps the board limits (min, max, default W) nodes reported per GPU
type (``boards``): what the Prolog's NVML knows, the models keep across restarts.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from slurm_green.core.models import Config

MAX_FACTOR = 4.0
FIRST_WEIGHT = 0.5
MIN_WEIGHT = 0.1
CAP_BUCKET = 0.05
FORMAT_VERSION = 1
METRICS = ("throughput", "power_w")


@dataclass(slots=True)
class Track:
    log_factor: float = 0.0
    count: int = 0

    def update(self, ratio: float) -> None:
        weight = max(MIN_WEIGHT, min(FIRST_WEIGHT, 1.0 / (self.count + 1)))
        bound = math.log(MAX_FACTOR)
        target = math.log(ratio)
        self.log_factor = max(-bound, min(bound, (1.0 - weight) * self.log_factor + weight * target))
        self.count += 1


def config_key(job_type: str, config: Config) -> str:
    bucket = round(round(config.cap_fraction / CAP_BUCKET) * CAP_BUCKET, 2)
    return f"{job_type}|{config.gpus}|{config.nodes}|{bucket}"


def type_key(job_type: str) -> str:
    return f"{job_type}|*"


class Corrections:
    """Correction factors, optionally persisted to ``path`` (JSON) after every observation."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.tracks: dict[str, dict[str, Track]] = {m: {} for m in METRICS}
        self.boards: dict[str, tuple[float, float, float]] = {}
        if self.path is not None and self.path.is_file():
            self._load(self.path)

    def __bool__(self) -> bool:
        return any(self.tracks[m] for m in METRICS)

    def factor(self, metric: str, job_type: str, config: Config) -> float:
        """The correction for ``config``: its own if observed, else the type's, else 1."""
        table = self.tracks[metric]
        if not table:
            return 1.0
        track = table.get(config_key(job_type, config)) or table.get(type_key(job_type))
        return math.exp(track.log_factor) if track else 1.0

    def observe(self, metric: str, job_type: str, config: Config, measured: float, predicted: float) -> None:
        if not (measured > 0 and predicted > 0 and math.isfinite(measured)):
            raise ValueError(f"{metric}: measured {measured!r} and predicted {predicted!r} must be positive")
        table = self.tracks[metric]
        for key in (config_key(job_type, config), type_key(job_type)):
            table.setdefault(key, Track()).update(measured / predicted)

    def save(self, path: str | Path | None = None) -> None:
        """Write atomically, so a controller killed mid-write never leaves a torn file."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("no path to save corrections to")
        data = {
            "format_version": FORMAT_VERSION,
            **{m: {k: [t.log_factor, t.count] for k, t in self.tracks[m].items()} for m in METRICS},
            "boards": {k: list(v) for k, v in sorted(self.boards.items())},
        }
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
        os.replace(tmp, target)

    def _load(self, path: Path) -> None:
        data = json.loads(path.read_text())
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}: corrections format {data.get('format_version')!r}, expected {FORMAT_VERSION}")
        for metric in METRICS:
            self.tracks[metric] = {k: Track(float(v[0]), int(v[1])) for k, v in data.get(metric, {}).items()}
        self.boards = {k: (float(v[0]), float(v[1]), float(v[2])) for k, v in data.get("boards", {}).items()}
