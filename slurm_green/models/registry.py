"""The registry policies and the simulator call: one fitted model per job type.

``throughput`` and ``power_w`` are closed forms over a few floats held by the model
(no pandas, no dict walks unless telemetry corrections exist), because policies call
them for thousands of jobs per decision. See docs/models.md for the model family.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from slurm_green.models.base import Config
from slurm_green.models.data_paths import has_perf_energy, perf_energy_dir
from slurm_green.models.names import NameResolver, normalise
from slurm_green.models.params import FittedParams, JobParams
from slurm_green.models.power_cap import GpuPowerParams
from slurm_green.models.refine import Corrections

PARAMS_ENV = "SLURM_GREEN_MODEL_PARAMS"


class FittedJobModel:
    """A ``JobModel``: throughput and power of one job type in any ``Config``.

    With ``slow`` the cap's compute-time stretch and ``sigma`` the synchronisation
    overhead (both in units of single-GPU compute time)::

        throughput = base * g / (slow(cap) + sigma(g, n))
        power_w    = g * (idle + (busy_power(cap) - idle) * slow / (slow + sigma))

    GPUs waiting on gradient sync draw close to idle, hence the busy fraction.
    Caps below the GPU's lowest settable limit are treated as that limit.
    """

    __slots__ = ("job_type", "params", "gpu", "unit", "_corrections", "_key",
                 "_base", "_a", "_b", "_an", "_bn", "_beta", "_exp", "_bite_scale", "_cap_min",
                 "_idle", "_busy_full")

    def __init__(self, params: JobParams, gpu: GpuPowerParams, corrections: Corrections, key: str) -> None:
        self.job_type = params.job_type
        self.params = params
        self.gpu = gpu
        self.unit = params.unit
        self._corrections = corrections
        self._key = key
        s, cap = params.scaling, params.cap
        self._base = params.base_throughput
        self._a, self._b, self._an, self._bn = s.a, s.b, s.a_net, s.b_net
        self._beta, self._exp = cap.beta, gpu.exponent
        self._bite_scale = gpu.draw_ratio / cap.natural_power_fraction
        self._cap_min = gpu.cap_min
        self._idle = gpu.idle_w
        self._busy_full = gpu.tdp_w * cap.natural_power_fraction

    # --- closed forms (uncorrected) -------------------------------------------------
    def _sigma(self, g: int, n: int) -> float:
        if g <= 1:
            return 0.0
        s = self._a + self._b * (g - 2)
        if n > 1:
            s += self._an + self._bn * (min(n, g) - 2)
        return s

    def _bite(self, cap: float) -> float:
        c = 1.0 if cap > 1.0 else (self._cap_min if cap < self._cap_min else cap)
        r = self._bite_scale * c
        return 1.0 if r > 1.0 else r

    def model_throughput(self, config: Config) -> float:
        """The fitted throughput before telemetry corrections."""
        g = config.gpus
        if g <= 0:
            return 0.0
        slow = 1.0 + self._beta * (self._bite(config.cap_fraction) ** -self._exp - 1.0)
        return self._base * g / (slow + self._sigma(g, config.nodes))

    def model_power_w(self, config: Config) -> float:
        """The fitted power before telemetry corrections."""
        g = config.gpus
        if g <= 0:
            return 0.0
        r = self._bite(config.cap_fraction)
        slow = 1.0 + self._beta * (r**-self._exp - 1.0)
        busy_w = max(self._idle, self._busy_full * r)
        busy_share = slow / (slow + self._sigma(g, config.nodes))
        return g * (self._idle + (busy_w - self._idle) * busy_share)

    # --- JobModel ------------------------------------------------------------------
    def throughput(self, config: Config) -> float:
        value = self.model_throughput(config)
        if self._corrections:
            value *= self._corrections.factor("throughput", self._key, config)
        return value

    def power_w(self, config: Config) -> float:
        value = self.model_power_w(config)
        if self._corrections:
            value *= self._corrections.factor("power_w", self._key, config)
        return value

    # --- vectorised helpers ----------------------------------------------------------
    def _arrays(self, gpus: object, nodes: object, caps: object) -> tuple[np.ndarray, ...]:
        g = np.asarray(gpus, dtype=float)
        n = np.minimum(np.maximum(np.asarray(nodes, dtype=float), 1.0), np.maximum(g, 1.0))
        c = np.clip(np.asarray(caps, dtype=float), self._cap_min, 1.0)
        r = np.minimum(1.0, self._bite_scale * c)
        slow = 1.0 + self._beta * (r**-self._exp - 1.0)
        sigma = np.where(g > 1, self._a + self._b * (g - 2) + np.where(n > 1, self._an + self._bn * (n - 2), 0.0), 0.0)
        return g, n, c, r, slow, sigma

    def _factors(self, metric: str, gpus: object, nodes: object, caps: object) -> np.ndarray | float:
        """Per-element telemetry corrections, keyed on the configurations as requested."""
        if not self._corrections:
            return 1.0
        g, n, c = np.broadcast_arrays(np.asarray(gpus), np.asarray(nodes), np.asarray(caps, dtype=float))
        flat = [self._corrections.factor(metric, self._key, Config(int(x), int(y), float(z)))
                for x, y, z in zip(g.ravel(), n.ravel(), c.ravel(), strict=True)]
        return np.array(flat).reshape(g.shape)

    def throughput_array(self, gpus: np.ndarray, nodes: np.ndarray | int = 1, caps: np.ndarray | float = 1.0) -> np.ndarray:
        """``throughput`` over arrays of GPU counts, node counts and cap fractions (broadcast)."""
        g, _, _, _, slow, sigma = self._arrays(gpus, nodes, caps)
        out = np.where(g > 0, self._base * g / (slow + sigma), 0.0)
        return out * self._factors("throughput", gpus, nodes, caps)

    def power_w_array(self, gpus: np.ndarray, nodes: np.ndarray | int = 1, caps: np.ndarray | float = 1.0) -> np.ndarray:
        """``power_w`` over arrays (broadcast), watts of all the job's GPUs."""
        g, _, _, r, slow, sigma = self._arrays(gpus, nodes, caps)
        busy_w = np.maximum(self._idle, self._busy_full * r)
        out = np.where(g > 0, g * (self._idle + (busy_w - self._idle) * slow / (slow + sigma)), 0.0)
        return out * self._factors("power_w", gpus, nodes, caps)


class FittedRegistry:
    """A ``ModelRegistry`` over fitted parameters, plus co-location and online refinement."""

    def __init__(self, params: FittedParams, corrections: Corrections | None = None) -> None:
        self.params = params
        self.corrections = corrections if corrections is not None else Corrections()
        self._resolver = NameResolver(params.jobs)
        self._models: dict[str | None, FittedJobModel] = {}
        self._gavel_types = {a for a, _ in params.colocation} | {b for _, b in params.colocation}

    @property
    def job_types(self) -> tuple[str, ...]:
        return tuple(self.params.jobs)

    @property
    def cap_min(self) -> float:
        """The lowest cap fraction the cluster's GPUs accept; lower requests are clamped."""
        return self.params.gpus[self.params.meta.get("gpu", "v100")].cap_min

    def resolve(self, job_type: str | None) -> str | None:
        """The modelled type a job name maps to, or ``None`` (then the default model is used)."""
        return self._resolver.resolve(job_type)

    def for_job(self, job_type: str | None) -> FittedJobModel:
        model = self._models.get(job_type)
        if model is None:
            canonical = self.resolve(job_type)
            if canonical is None:
                params = self.params.default
                key = f"unknown:{normalise(job_type or '')}"
            else:
                params, key = self.params.jobs[canonical], canonical
            model = FittedJobModel(params, self.params.gpus[params.gpu], self.corrections, key)
            self._models[job_type] = model
        return model

    def colocated_slowdown(self, type_a: str | None, type_b: str | None) -> tuple[float, float]:
        """``(slow_a, slow_b)``: each job's time stretch when both share one GPU.

        ``inf`` when the pair does not fit on one GPU; the conservative default for
        pairs with a member that has no Gavel measurement (directly or by proxy).
        """
        ga, gb = self._colocation_type(type_a), self._colocation_type(type_b)
        if ga is not None and gb is not None:
            pair = self.params.colocation.get((ga, gb))
            if pair is not None:
                return pair
            swapped = self.params.colocation.get((gb, ga))
            if swapped is not None:
                return swapped[1], swapped[0]
        d = self.params.colocation_default
        return d, d

    def _colocation_type(self, job_type: str | None) -> str | None:
        canonical = self.resolve(job_type)
        if canonical in self._gavel_types:
            return canonical
        return self.params.colocation_proxy.get(canonical or "")

    def observe(self, job_type: str | None, config: Config, measured_throughput: float | None = None,
                measured_power_w: float | None = None) -> None:
        """Fold one telemetry sample into the job type's corrections (persisted if a path is set)."""
        model = self.for_job(job_type)
        if measured_throughput is not None:
            self.corrections.observe("throughput", model._key, config, measured_throughput,
                                     model.model_throughput(config))
        if measured_power_w is not None:
            self.corrections.observe("power_w", model._key, config, measured_power_w, model.model_power_w(config))
        if self.corrections.path is not None and (measured_throughput is not None or measured_power_w is not None):
            self.corrections.save()


@lru_cache(maxsize=8)
def fitted_params(perf: Path, gpu: str) -> FittedParams:
    """Fit once per process and data directory (about half a second)."""
    from slurm_green.models.fit import fit_all  # pandas only when fitting

    return fit_all(perf, gpu)


def builtin_params() -> FittedParams:
    from slurm_green.models.builtin_params import load

    return load()


def default_registry(gpu: str = "v100", *, data_dir: str | Path | None = None,
                     params_path: str | Path | None = None,
                     corrections_path: str | Path | None = None) -> FittedRegistry:
    """The registry to use: fitted-parameters JSON if given (or ``$SLURM_GREEN_MODEL_PARAMS``),
    else a fit of the data in ``data_dir`` / ``$SLURM_GREEN_DATA``, else the built-in V100 set."""
    path = params_path or os.environ.get(PARAMS_ENV)
    perf = perf_energy_dir(Path(data_dir) if data_dir is not None else None)
    if path:
        params = FittedParams.load(path)
    elif has_perf_energy(perf.parent):
        params = fitted_params(perf.resolve(), gpu)
    elif gpu == "v100":
        params = builtin_params()
    else:
        raise FileNotFoundError(f"no profile data at {perf} and built-in parameters exist only for v100")
    if params.meta.get("gpu", gpu) != gpu:
        raise ValueError(f"parameters are fitted for {params.meta.get('gpu')}, not {gpu}")
    return FittedRegistry(params, Corrections(corrections_path) if corrections_path else None)

