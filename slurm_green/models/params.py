"""The fitted parameters of every (job type, GPU type), as plain data that round-trips through JSON.

Why a JSON file shipped as package data (``fitted_params.json``, in every wheel): what a
site's controller runs must not depend on a folder that happens to sit next to the
checkout. Fitting reads the profiles with pandas once, on an explicit command
(``slurm-green models fit --data DIR --out FILE``); a controller only loads a file.
``params_id``, a short hash of the file's content, names the parameters in every
decision the controller stores.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from slurm_green.models.colocation import LoadModel
from slurm_green.models.power_cap import CapParams, GpuPowerParams
from slurm_green.models.scaling import ScalingParams

FORMAT_VERSION = 3
#: The parameters every install carries (regenerate with ``slurm-green models fit --out`` this path).
PACKAGED_PATH = Path(__file__).with_name("fitted_params.json")

Pair = tuple[float, float]


@dataclass(frozen=True, slots=True)
class JobParams:
    """One job type on one GPU type: single-GPU full-power throughput in ``unit``/s, scaling, cap response."""

    job_type: str
    gpu: str
    unit: str
    base_throughput: float
    scaling: ScalingParams
    cap: CapParams
    source: str


@dataclass(frozen=True)
class GpuTypeParams:
    """Every job type's model on one GPU type."""

    gpu: GpuPowerParams
    jobs: dict[str, JobParams]
    default: JobParams

    def to_dict(self) -> dict[str, object]:
        return {"gpu": asdict(self.gpu), "jobs": [asdict(j) for j in self.jobs.values()],
                "default": asdict(self.default)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuTypeParams:
        return cls(gpu=GpuPowerParams(**data["gpu"]), jobs={d["job_type"]: _job(d) for d in data["jobs"]},
                   default=_job(data["default"]))


def _job(d: dict[str, Any]) -> JobParams:
    return JobParams(**{**d, "scaling": ScalingParams(**d["scaling"]), "cap": CapParams(**d["cap"])})


@dataclass(frozen=True)
class FittedParams:
    """All GPU types' models; ``primary`` is the type a registry models when not told one.

    ``colocation[gpu]``: the pair slowdowns measured on that GPU type by time-slicing
    (Gavel's pairs; the H100's time-slicing run; other types use the primary's table);
    ``colocation_mps[gpu]`` the same under CUDA MPS where measured (the H100);
    ``colocation_load[mechanism]`` the ``LoadModel`` for pairs no table covers and for
    every pair's power.
    """

    types: dict[str, GpuTypeParams]
    primary: str
    colocation: dict[str, dict[tuple[str, str], Pair]]
    colocation_mps: dict[str, dict[tuple[str, str], Pair]]
    colocation_load: dict[str, LoadModel]
    colocation_proxy: dict[str, str]
    meta: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "format_version": FORMAT_VERSION,
            "meta": self.meta,
            "primary": self.primary,
            "types": {name: t.to_dict() for name, t in sorted(self.types.items())},
            "colocation": {gpu: [[a, b, sa, sb] for (a, b), (sa, sb) in sorted(table.items())]
                           for gpu, table in sorted(self.colocation.items())},
            "colocation_mps": {gpu: [[a, b, sa, sb] for (a, b), (sa, sb) in sorted(table.items())]
                               for gpu, table in sorted(self.colocation_mps.items())},
            "colocation_load": {m: asdict(load) for m, load in sorted(self.colocation_load.items())},
            "colocation_proxy": self.colocation_proxy,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FittedParams:
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"fitted-parameters format {data.get('format_version')!r}, expected {FORMAT_VERSION}")
        params = cls(
            types={name: GpuTypeParams.from_dict(t) for name, t in data["types"].items()},
            primary=str(data["primary"]),
            colocation={gpu: {(a, b): (float(sa), float(sb)) for a, b, sa, sb in rows}
                        for gpu, rows in data["colocation"].items()},
            colocation_mps={gpu: {(a, b): (float(sa), float(sb)) for a, b, sa, sb in rows}
                            for gpu, rows in data["colocation_mps"].items()},
            colocation_load={m: LoadModel(**load) for m, load in data["colocation_load"].items()},
            colocation_proxy=dict(data["colocation_proxy"]),
            meta=dict(data.get("meta", {})),
        )
        if params.primary not in params.types or params.primary not in params.colocation:
            raise ValueError(f"primary GPU type {params.primary!r} has no parameters")
        return params

    @property
    def params_id(self) -> str:
        """12 hex digits of the SHA-256 of the canonical JSON: equal ids, equal parameters."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    def save(self, path: str | Path) -> None:
        """One job or pair per line: a refit's diff reads as the rows that changed."""
        Path(path).write_text(_render(self.to_dict()) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> FittedParams:
        """``ValueError`` naming the file when it is not a parameter file of this format."""
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a fitted-parameters file ({type(exc).__name__}: {exc})") from exc
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc


def _render(value: object, depth: int = 0) -> str:
    """JSON with containers of scalars, and anything nested four deep, on one line.

    (``json`` writes inf as Infinity, which ``json.loads`` reads back: pairs that do not fit stay inf.)
    """
    children = list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else None
    if children is None or depth >= 4 or not any(isinstance(c, (dict, list)) for c in children):
        return json.dumps(value, sort_keys=True)
    pad, end = " " * (depth + 1), " " * depth
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {_render(v, depth + 1)}" for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    return "[\n" + ",\n".join(pad + _render(v, depth + 1) for v in children) + "\n" + end + "]"
