"""The registry policies and the simulator call: one fitted model per (job type, GPU type).

``throughput`` and ``power_w`` are closed forms over a few floats held by the model
(no pandas, no dict walks unless telemetry corrections exist), because policies call
them for thousands of jobs per decision. See docs/models.md for the model family.

Where the parameters come from: a file, never a fit. ``default_registry`` loads the
parameters shipped in the package, or a site's own file (``params_path``,
``$SLURM_GREEN_MODEL_PARAMS``) written by ``slurm-green models fit``; ``params_id``
names them in every decision.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from slurm_green.core.models import Config, Observation
from slurm_green.models.colocation import MEASURED_CLIP, MECHANISMS, clip_stretch, heaviness, pair_power_w
from slurm_green.models.gpu_types import (Board, board_of, canonical_gpu, conservative_type, rescaled_type,
                                          weakest_cap_response)
from slurm_green.models.names import NameResolver, normalise, unmodelled
from slurm_green.models.params import PACKAGED_PATH, FittedParams, GpuTypeParams, JobParams
from slurm_green.models.power_cap import GpuPowerParams, capped_board_w
from slurm_green.models.refine import Corrections, type_key

PARAMS_ENV = "SLURM_GREEN_MODEL_PARAMS"
#: A reported board within this share of the fitted one is the fitted board.
BOARD_TOLERANCE = 0.05
#: Models (and ``assumed`` answers) kept per (job name, GPU type) at most: a site whose users name
#: every job afresh would otherwise keep one per job for the controller's life; rebuilt on demand.
MAX_KEPT = 10_000
log = logging.getLogger(__name__)


class FittedJobModel:
    """A ``JobModel``: throughput and power of one job type in any ``Config``.

    With ``slow`` the cap's compute-time stretch and ``sigma`` the synchronisation
    overhead (both in units of single-GPU compute time)::

        throughput = base * g / (slow(cap) + sigma(g, n))
        power_w    = g * (idle + (busy_power(cap) - idle) * slow / (slow + sigma))

    GPUs waiting on gradient sync draw close to idle, hence the busy fraction.
    Caps below the GPU's lowest settable limit are treated as that limit.

    ``gpu_assumed``: the GPU type has no fitted parameters and this model is the
    conservative one built from its board limits (``gpu_note`` says from what).
    ``job_assumed``: the job's name matches no modelled job type and this model is the
    conservative default (``job_note`` says so, naming the job).
    """

    __slots__ = ("job_type", "params", "gpu", "unit", "gpu_assumed", "gpu_note", "job_assumed", "job_note",
                 "_corrections", "_key", "_base", "_a", "_b", "_an", "_bn", "_beta", "_exp", "_bite_scale",
                 "_cap_min", "_idle", "_busy_full")

    def __init__(self, params: JobParams, gpu: GpuPowerParams, corrections: Corrections, key: str,
                 gpu_note: str = "", job_note: str = "") -> None:
        self.job_type = params.job_type
        self.params = params
        self.gpu = gpu
        self.unit = params.unit
        self.gpu_assumed = bool(gpu_note)
        self.gpu_note = gpu_note
        self.job_assumed = bool(job_note)
        self.job_note = job_note
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
    """A ``ModelRegistry`` over fitted parameters, per GPU type, plus co-location and online refinement.

    ``gpu`` is the type a call without one means (the site's main GPU type). Every
    method taking ``gpu`` accepts a gres type or an NVML product name.
    """

    def __init__(self, params: FittedParams, corrections: Corrections | None = None, gpu: str | None = None) -> None:
        self.params = params
        self.params_id = params.params_id
        self.gpu = canonical_gpu(gpu, params.types) if gpu else params.primary
        if self.gpu not in params.types:
            raise ValueError(f"no fitted parameters for GPU type {gpu!r}; fitted: {', '.join(sorted(params.types))}")
        self.corrections = corrections if corrections is not None else Corrections()
        self._resolver = NameResolver(params.types[self.gpu].jobs)
        self._models: dict[tuple[str | None, str], FittedJobModel] = {}
        self._types: dict[str, tuple[GpuTypeParams, str]] = {}
        #: Bumped whenever an answer may change (a correction or a board learned): a caller that
        #: keeps answers (``policy/config_table``) rebuilds them when it moves.
        self.revision = 0
        self._gavel_types = {t for pairs in params.colocation.values() for pair in pairs for t in pair}
        #: ``assumed``'s answers by (job name, GPU type) as asked: the controller stamps every decision
        #: with one, so a name is looked up once, not resolved per decision (cleared with the models).
        self._assumed: dict[tuple[str | None, str | None], str] = {}

    @property
    def job_types(self) -> tuple[str, ...]:
        return tuple(self.params.types[self.gpu].jobs)

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The GPU types with fitted parameters (others get the conservative board model)."""
        return tuple(sorted(self.params.types))

    @property
    def seen_gpu_types(self) -> tuple[str, ...]:
        """The fitted types and every type a node reported a board for (``observe_board``):
        what a site's controller plans for, the unprofiled ones on their conservative model."""
        return tuple(sorted(set(self.params.types) | set(self.corrections.boards)))

    def gpu_type(self, gpu: str | None = None) -> str:
        """The canonical type of ``gpu`` (None: the registry's own)."""
        return self.gpu if gpu is None else canonical_gpu(gpu, self.params.types)

    def board(self, gpu: str | None = None) -> Board | None:
        """The power limits nodes reported for ``gpu`` (``observe_board``), if any did."""
        limits = self.corrections.boards.get(self.gpu_type(gpu))
        return Board(*limits) if limits else None

    def observe_board(self, gpu: str, min_w: float, max_w: float, default_w: float) -> None:
        """What a node's NVML says about ``gpu``'s board (the Epilog's record carries it):
        the cap set then reaches the board's own minimum, an unprofiled type is modelled
        from these limits, a profiled type on a different board is scaled to it."""
        name, board = self.gpu_type(gpu), Board(min_w, max_w, default_w)
        if self.board(name) == board:
            return
        self.corrections.boards[name] = (board.min_w, board.max_w, board.default_w)
        self.revision += 1
        self._types.pop(name, None)
        self._models = {k: m for k, m in self._models.items() if k[1] != name}
        self._assumed.clear()
        if self.corrections.path is not None:
            self.corrections.save()

    def board_power_w(self, gpu: str | None = None) -> tuple[float, float]:
        board = self.type_params(gpu)[0].gpu
        return board.idle_w, board.tdp_w

    def type_params(self, gpu: str | None = None) -> tuple[GpuTypeParams, str]:
        """``gpu``'s parameters, and why they are assumed ("" when fitted on its own data)."""
        name = self.gpu_type(gpu)
        cached = self._types.get(name)
        if cached is None:
            cached = self._types[name] = self._build_type(name)
            if cached[1]:
                log.warning("GPU type %s: %s", name, cached[1])
        return cached

    def _build_type(self, name: str) -> tuple[GpuTypeParams, str]:
        fitted, board = self.params.types.get(name), self.board(name)
        if fitted is not None:
            if board is None or abs(board.max_w / fitted.gpu.tdp_w - 1.0) <= BOARD_TOLERANCE:
                return fitted, ""
            note = (f"fitted on a {fitted.gpu.tdp_w:g} W board, this one reports {board.max_w:g} W: shape scaled "
                    f"to it, speed scaled down by the board's power when smaller")
            return rescaled_type(name, fitted, board, note), note
        primary = self.params.types[self.gpu]
        if board is not None:
            note = f"not profiled; conservative model from its board ({board.min_w:g}-{board.max_w:g} W)"
        else:
            board = board_of(primary.gpu)
            note = f"not profiled and no board limits reported; conservative model on {self.gpu}'s board"
        source = weakest_cap_response(self.params.types, primary, board)
        note = f"{note}, with {source}'s cap response (the fitted type on which caps save least)"
        return conservative_type(name, board, primary, self.params.types[source], note), note

    def allowed_caps(self, gpu: str | None = None, *, accept_cap: bool = True, floor: float = 0.0,
                     step: float = 0.05) -> tuple[float, ...]:
        """The cap fractions (of the board's maximum) a policy may choose on ``gpu``: every
        multiple of ``step`` from the board's own minimum (reported by its nodes, else the
        lowest measured) up to 1, and that minimum itself; never below ``floor`` (the site's
        floor, or the user's when higher); only 1.0 when the job refuses caps (``cap=no``)."""
        if not accept_cap:
            return (1.0,)
        board = self.board(gpu)
        lowest = board.min_fraction if board is not None else self.type_params(gpu)[0].gpu.cap_min
        lowest = min(1.0, max(lowest, floor))
        grid = (k * step for k in range(math.ceil(lowest / step), int(round(1.0 / step)) + 1))
        return tuple(sorted({round(lowest, 4), 1.0} | {round(c, 4) for c in grid if c - lowest >= step / 2}))

    def energy_optimal_cap(self, job_type: str | None, gpu: str | None = None, *, accept_cap: bool = True,
                           floor: float = 0.0, step: float = 0.05) -> float:
        """The cap of ``allowed_caps`` with the least energy per unit of work (one GPU;
        among equals the highest cap, which loses no time)."""
        model = self.for_job(job_type, gpu)
        caps = self.allowed_caps(gpu, accept_cap=accept_cap, floor=floor, step=step)
        energy = [round(model.power_w(Config(1, 1, c)) / model.throughput(Config(1, 1, c)), 12) for c in caps]
        return max((c for c, e in zip(caps, energy, strict=True) if e == min(energy)))

    def resolve(self, job_type: str | None) -> str | None:
        """The modelled type a job name maps to, or ``None`` (then the default model is used)."""
        return self._resolver.resolve(job_type)

    def for_job(self, job_type: str | None, gpu: str | None = None) -> FittedJobModel:
        """``job_type``'s model on ``gpu`` (None: the registry's own type)."""
        name = self.gpu if gpu is None else self.gpu_type(gpu)
        model = self._models.get((job_type, name))
        if model is None:
            if len(self._models) >= MAX_KEPT:  # one entry per job name: forget them all rather than grow
                self._models.clear()
            params, note = self.type_params(name)
            canonical = self.resolve(job_type)
            if canonical is None:
                job, key, job_note = params.default, f"unknown:{normalise(job_type or '')}", unmodelled(job_type)
            else:
                job, key, job_note = params.jobs[canonical], canonical, ""
            key = key if name == self.gpu else f"{key}@{name}"
            model = self._models[(job_type, name)] = FittedJobModel(job, params.gpu, self.corrections, key, note,
                                                                    job_note)
        return model

    def assumed(self, job_type: str | None, gpu: str | None = None) -> str:
        """What ``job_type``'s model on ``gpu`` assumes rather than fits: "" when both the job type
        and the GPU type have fitted parameters, else why not (``job_note``, then ``GPU type X:``
        ``gpu_note``). What every decision records (``controller.tick.stamped``), so it is memoised
        per (name, GPU type) as asked; a board learned (``observe_board``) clears it."""
        answer = self._assumed.get((job_type, gpu))
        if answer is None:
            if len(self._assumed) >= MAX_KEPT:
                self._assumed.clear()
            model = self.for_job(job_type, gpu)
            gpu_part = f"GPU type {self.gpu_type(gpu)}: {model.gpu_note}" if model.gpu_assumed else ""
            answer = self._assumed[(job_type, gpu)] = "; ".join(p for p in (model.job_note, gpu_part) if p)
        return answer

    def colocated_slowdown(self, type_a: str | None, type_b: str | None, gpu: str | None = None,
                           mechanism: str = "timeslice") -> tuple[float, float]:
        """``(slow_a, slow_b)``: each job's time stretch when both share one GPU of type ``gpu``
        (``colocation`` without the power)."""
        slow_a, slow_b, _ = self.colocation(type_a, type_b, gpu, mechanism)
        return slow_a, slow_b

    def colocation(self, type_a: str | None, type_b: str | None, gpu: str | None = None,
                   mechanism: str = "timeslice", power_a_w: float | None = None,
                   power_b_w: float | None = None, cap_fraction: float | None = None) -> tuple[float, float, float]:
        """``(slow_a, slow_b, power_w)`` of two jobs sharing one GPU of type ``gpu`` under
        ``mechanism`` (``timeslice``: gres/shard; ``mps``: gres/mps).

        Slowdowns: the measured pair (Gavel on V100, P100, K80; the H100 run, whose MPS pairs
        serve ``mps``; other types and mechanisms use the time-slicing table of the type, else
        the primary's); ``inf`` when the pair does not fit. A pair with a member no table
        covers comes from the load model: each job's heaviness from its power alone on one GPU
        (``power_x_w``, e.g. measured by telemetry; else its model's, or the board's maximum for
        an unknown job: the most conservative). ``power_w``: the shared GPU's power from the
        load model, each job's power alone as above, at most what the board draws under
        ``cap_fraction`` (the cap the shared GPU runs under; None or 1.0: none, the board's maximum).
        Where that bound is under the pair's power, both slowdowns are stretched by how far it
        cuts the pair's dynamic power beyond the deepest clip measured for ``mechanism``
        (``colocation.clip_stretch``): the clocks drop to hold the limit, and no measurement
        shows a deeper clip saving energy, so it is charged in time.
        """
        slow_a, slow_b, power_w = self.colocation_arrays([type_a], [type_b], gpu, mechanism,
                                                         None if power_a_w is None else [power_a_w],
                                                         None if power_b_w is None else [power_b_w], cap_fraction)
        return float(slow_a[0]), float(slow_b[0]), float(power_w[0])

    def colocation_arrays(self, types_a: Sequence[str | None], types_b: Sequence[str | None], gpu: str | None = None,
                          mechanism: str = "timeslice", power_a_w: Sequence[float] | np.ndarray | None = None,
                          power_b_w: Sequence[float] | np.ndarray | None = None,
                          cap_fraction: float | Sequence[float] | np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """``colocation`` over sequences of pairs (one GPU type and mechanism): arrays
        ``slow_a, slow_b, power_w``; ``power_x_w`` entries that are NaN count as unknown;
        ``cap_fraction`` one cap for all the pairs or one per pair (None, or 1.0 for a pair: uncapped)."""
        if mechanism not in MECHANISMS:
            raise ValueError(f"unknown sharing mechanism {mechanism!r}; choose from {', '.join(MECHANISMS)}")
        name = self.gpu_type(gpu)
        board = self.type_params(name)[0].gpu
        load = self.params.colocation_load[mechanism]
        table = self._pair_table(name, mechanism)
        power_a = self._solo_power(types_a, name, board, power_a_w)
        power_b = self._solo_power(types_b, name, board, power_b_w)
        measured = [self._measured_pair(table, a, b) for a, b in zip(types_a, types_b, strict=True)]
        h_a = heaviness(power_a, board.idle_w, board.tdp_w)
        h_b = heaviness(power_b, board.idle_w, board.tdp_w)
        slow_a = np.array([m[0] if m else np.nan for m in measured], dtype=float)
        slow_b = np.array([m[1] if m else np.nan for m in measured], dtype=float)
        # A measured speed-up when shared (the H100's resnet18 under MPS, 0.96) is run-to-run noise.
        slow_a = np.maximum(np.where(np.isnan(slow_a), load.slowdown(h_b), slow_a), 1.0)
        slow_b = np.maximum(np.where(np.isnan(slow_b), load.slowdown(h_a), slow_b), 1.0)
        # The slowdowns were measured (or fitted) at full power; a cap under the pair's draw slows both.
        demand = pair_power_w(power_a, power_b, slow_a, slow_b, board.idle_w, board.tdp_w, load.power_scale)
        bound = capped_board_w(board, cap_fraction)
        clipped = clip_stretch(demand, bound, board.idle_w, MEASURED_CLIP[mechanism])
        return slow_a * clipped, slow_b * clipped, np.minimum(demand, bound)

    def _pair_table(self, name: str, mechanism: str) -> dict[tuple[str, str], tuple[float, float]]:
        if mechanism == "mps" and name in self.params.colocation_mps:
            return self.params.colocation_mps[name]
        return self.params.colocation[name if name in self.params.colocation else self.params.primary]

    def _measured_pair(self, table: dict[tuple[str, str], tuple[float, float]], type_a: str | None,
                       type_b: str | None) -> tuple[float, float] | None:
        ga, gb = self._colocation_type(type_a), self._colocation_type(type_b)
        if ga is None or gb is None:
            return None
        pair = table.get((ga, gb))
        if pair is not None:
            return pair
        swapped = table.get((gb, ga))
        return (swapped[1], swapped[0]) if swapped is not None else None

    def _solo_power(self, types: Sequence[str | None], gpu: str, board: GpuPowerParams,
                    measured: Sequence[float] | np.ndarray | None) -> np.ndarray:
        """Each job's power alone on one GPU: measured where given; else its model's for a known
        type, or for an unknown one whose power telemetry has measured (the corrected default
        model); else the board's maximum."""
        model = np.array([self.for_job(t, gpu).power_w(Config(1)) if self._power_known(t, gpu) else board.tdp_w
                          for t in types], dtype=float)
        if measured is None:
            return model
        given = np.asarray(measured, dtype=float)
        return np.where(np.isnan(given), model, given)

    def _power_known(self, job_type: str | None, gpu: str) -> bool:
        if self.resolve(job_type) is not None:
            return True
        return type_key(self.for_job(job_type, gpu)._key) in self.corrections.tracks["power_w"]

    def _colocation_type(self, job_type: str | None) -> str | None:
        canonical = self.resolve(job_type)
        if canonical in self._gavel_types:
            return canonical
        return self.params.colocation_proxy.get(canonical or "")

    def observe(self, job_type: str | None, config: Config, measured_throughput: float | None = None,
                measured_power_w: float | None = None, gpu: str | None = None) -> None:
        """Fold one telemetry sample of a job on ``gpu`` into its corrections (persisted if a path is set)."""
        model = self.for_job(job_type, gpu)
        if measured_throughput is not None:
            self.corrections.observe("throughput", model._key, config, measured_throughput,
                                     model.model_throughput(config))
        if measured_power_w is not None:
            self.corrections.observe("power_w", model._key, config, measured_power_w, model.model_power_w(config))
        if measured_throughput is not None or measured_power_w is not None:
            self.revision += 1
        if self.corrections.path is not None and (measured_throughput is not None or measured_power_w is not None):
            self.corrections.save()

    def learn(self, seen: Observation) -> None:
        """Everything one finished job's telemetry teaches: its GPU type's board limits, then
        its measured throughput and power on that type (the tick's one call per observation)."""
        if seen.board is not None:  # an untyped gres: the registry's own type
            self.observe_board(seen.gpu or self.gpu, *seen.board)
        self.observe(seen.job_type, seen.config, seen.throughput, seen.power_w, seen.gpu)


@lru_cache(maxsize=4)
def fitted_params(perf: Path) -> FittedParams:
    """Fit once per process and data directory (about half a second): for the commands,
    benchmarks and tests that fit on purpose, never for a controller."""
    from slurm_green.models.fit import fit_all  # pandas only when fitting

    return fit_all(perf)


@lru_cache(maxsize=8)
def _load(path: Path, mtime_ns: int, size: int) -> FittedParams:
    return FittedParams.load(path)


def load_params(path: str | Path) -> FittedParams:
    """A parameter file, read once per process while it is unchanged."""
    resolved = Path(path).resolve()
    try:
        stat = resolved.stat()
    except OSError as exc:
        raise FileNotFoundError(f"model parameters {path}: {exc.strerror} (write one with "
                                f"`slurm-green models fit --data DIR --out FILE`)") from exc
    return _load(resolved, stat.st_mtime_ns, stat.st_size)


def default_registry(gpu: str | None = None, *, params_path: str | Path | None = None,
                     corrections_path: str | Path | None = None) -> FittedRegistry:
    """The registry to use: ``params_path``, else ``$SLURM_GREEN_MODEL_PARAMS``, else the
    parameters shipped with the package; ``gpu`` the type meant when a caller names none
    (default: the parameters' primary type, the V100)."""
    path = params_path or os.environ.get(PARAMS_ENV) or PACKAGED_PATH
    return FittedRegistry(load_params(path), Corrections(corrections_path) if corrections_path else None, gpu)
