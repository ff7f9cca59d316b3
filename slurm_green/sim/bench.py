"""Every policy on one trace and one carbon series: the table, the frontier and the lower bound.

Each policy runs at its default setting, then along a sweep of its knob (GreenFlow's
and PowerFlow's budget fraction, the window policies' flexibility, Zeus' eta), which
traces a JCT-carbon frontier. "At equal carbon" compares a baseline's JCT with
GreenFlow's at that carbon, read two ways: measured-only (the best JCT of any swept
setting that used no more carbon) and interpolated (on the lower-left convex hull of
the swept points, ``interpolated_at``: an estimate, not a measurement). "At equal
energy" does the same for PowerFlow. Only runs that finished every job count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from slurm_green.carbon.signal import CarbonSignal
from slurm_green.core.models import ModelRegistry
from slurm_green.core.plan import Policy
from slurm_green.policy import registry
from slurm_green.policy.registry import PolicyKnobs
from slurm_green.policy.lower_bound import LowerBound, carbon_lower_bound
from slurm_green.sim.bounds import bound_inputs
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import Simulator, TraceOptions
from slurm_green.sim.runner import RunResult, simulate
from slurm_green.sim.workload import Workload

BASELINES = ("fifo", "window", "window+cap", "window-aware", "zeus")
POLICY_NAMES = BASELINES + ("greenflow", "powerflow", "eaco")  # the bench's labels, in its order
BUDGETS = (1.2, 1.0, 0.9, 0.8, 0.7, 0.6)
FLEX_HOURS = (0.0, 6.0, 24.0)
ETAS = (0.0, 0.5, 1.0)


#: The bench's labels: a registry policy (``policy/registry.py``, the controller's too) and the
#: knobs that differ from its defaults. The window baselines are start-time shifting alone and
#: with a fixed 70 % cap, each job on its own (capacity-blind, as CATS users do), and
#: ``window-aware``: uncapped, placing each job where the cluster still has room for it.
LABELS: dict[str, tuple[str, dict[str, Any]]] = {
    "fifo": ("fifo", {}), "window": ("window", {"cap_fraction": None}), "window+cap": ("window", {"cap_fraction": 0.7}),
    "window-aware": ("window-aware", {"cap_fraction": None}), "zeus": ("zeus", {}), "greenflow": ("greenflow", {}),
    "powerflow": ("powerflow", {}), "eaco": ("eaco", {}),
    # Not in the bench's runs (no trace job allows sharing unless told): benchmarks/colocation.py.
    "greenflow+share": ("greenflow", {"colocate": True}),
    # Not in the bench's runs: it differs from greenflow only where jobs are elastic
    # (``TraceOptions.accept_requeue``, ``simulate(resize=...)``): benchmarks/layer_freezing.py.
    "icefrog": ("icefrog", {}),
}


def make_policy(name: str, budget: float | None = None, **knobs: Any) -> Policy:
    """A policy by its bench label; ``budget`` overrides GreenFlow's/PowerFlow's budget
    fraction, ``knobs`` any other setting of ``PolicyKnobs``."""
    if name not in LABELS:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(LABELS)}")
    base, preset = LABELS[name]
    if budget is not None:
        knobs = {**knobs, "budget_fraction": budget}
    policy = registry.make_policy(PolicyKnobs(name=base, **{**preset, **knobs}))
    # Every registry policy is a frozen dataclass with a ``name``; the Policy protocol does not say so.
    return policy if name == base else replace(policy, name=name)  # type: ignore[type-var]


@dataclass
class Point:
    """One run of a sweep. ``finished`` of ``jobs``: a run that left jobs unfinished leaves them
    out of its JCT and carbon (``SimRecord.summary``), so it would look better than it was."""

    setting: str
    avg_jct_s: float
    energy_kwh: float
    carbon_kg: float
    finished: int
    jobs: int

    @property
    def complete(self) -> bool:
        return self.finished >= self.jobs


@dataclass
class BenchResult:
    runs: dict[str, RunResult]
    frontier: dict[str, list[Point]]
    lower_bound: LowerBound
    equal_carbon: dict[str, float] = field(default_factory=dict)  #: baseline -> its JCT / GreenFlow's
    equal_energy: dict[str, float] = field(default_factory=dict)  #: baseline -> its JCT / PowerFlow's

    def versus_best(self, policy: str = "greenflow", x_attr: str = "carbon_kg", interpolate: bool = False) -> Versus:
        """``policy``'s speed-up over the strongest baseline point at its ``x_attr``: measured-only
        (equal-or-less), or read from ``policy``'s interpolated frontier (``interpolated_at``)."""
        baselines = {b: pts for b, pts in self.frontier.items() if b in BASELINES}
        return versus_best(self.frontier.get(policy, []), baselines, x_attr,
                           interpolated_at if interpolate else best_at)

    def to_dict(self) -> dict[str, object]:
        fifo = self.runs["fifo"].summary
        policies = {}
        for name, run in self.runs.items():
            s = run.summary
            policies[name] = {**s, "jct_ratio": s["avg_jct_s"] / fifo["avg_jct_s"],
                              "energy_ratio": s["energy_kwh"] / fifo["energy_kwh"],
                              "carbon_ratio": s["carbon_kg"] / fifo["carbon_kg"],
                              "carbon_over_lower_bound": s["carbon_kg"] / self.lower_bound.carbon_kg,
                              "ticks": run.ticks, "wall_s": run.wall_s}
        return {
            "policies": policies,
            "lower_bound_carbon_kg": self.lower_bound.carbon_kg,
            "lower_bound": {"capacity": self.lower_bound.capacity},
            "frontier": {k: [{**p.__dict__, "complete": p.complete} for p in v] for k, v in self.frontier.items()},
            "incomplete_points": [f"{k} {p.setting}" for k, v in self.frontier.items() for p in v if not p.complete],
            **{f"{policy}_vs_best_{x.split('_')[0]}": {
                how: self.versus_best(policy, x, how == "interpolated").to_dict()
                for how in ("measured", "interpolated")}
               for policy, x in (("greenflow", "carbon_kg"), ("powerflow", "energy_kwh")) if policy in self.frontier},
            # NaN (the sweep never got that low) is not JSON: null, i.e. "not reached".
            "greenflow_jct_speedup_at_equal_carbon": {k: _finite_or_none(v) for k, v in self.equal_carbon.items()},
            "powerflow_jct_speedup_at_equal_energy": {k: _finite_or_none(v) for k, v in self.equal_energy.items()},
        }


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def speedup_text(ratio: float | None) -> str:
    """A JCT speed-up for a table: ``1.37x``, or ``not reached`` when no swept setting got that low."""
    return f"{ratio:.2f}x" if ratio is not None and np.isfinite(ratio) else "not reached"


@dataclass
class Versus:
    """A policy's frontier against every swept point of every baseline, at equal-or-less carbon (energy).

    ``speedup`` is the smallest ratio baseline JCT / the policy's JCT at that baseline point's
    ``x`` (as ``versus_best``'s ``read`` gives it), over the baseline points the policy's
    sweep reaches: the speed-up over the strongest baseline it can match. ``not_reached``
    lists the baseline points that used less than any setting of the policy (no comparison
    is possible there).
    """

    speedup: float
    against: str
    not_reached: list[str]
    #: baseline points whose run left jobs unfinished: not compared (their JCT and carbon leave those jobs out)
    incomplete: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"speedup": _finite_or_none(self.speedup), "against": self.against, "not_reached": self.not_reached,
                "incomplete": self.incomplete}


def settings_of(name: str, options: TraceOptions, budgets: tuple[float, ...] = BUDGETS) -> list[tuple[str, Policy, TraceOptions]]:
    """``name``'s settings along its knob: (label, policy, trace options)."""
    if name in ("greenflow", "powerflow"):
        return [(f"budget={b:g}", make_policy(name, b), options) for b in budgets]
    if name in ("window", "window+cap", "window-aware"):
        return [(f"flex={h:g}h", make_policy(name), replace(options, flex_s=h * 3600.0)) for h in FLEX_HOURS]
    if name == "zeus":
        return [(f"eta={e:g}", make_policy(name, eta=e), options) for e in ETAS]
    return [("default", make_policy(name), options)]


def best_at(points: list[Point], x_attr: str, x: float) -> float:
    """The best JCT among swept settings that finished every job and use no more than ``x``
    (carbon or energy): measured-only.

    No interpolation: realised carbon is not monotone in the budget (deferred jobs can
    queue past their window), so only settings actually measured at or under ``x``
    count. NaN when no setting gets that low.
    """
    fits = [p.avg_jct_s for p in points if p.complete and getattr(p, x_attr) <= x]
    return min(fits) if fits else float("nan")


def frontier_hull(points: list[Point], x_attr: str) -> list[tuple[float, float]]:
    """The vertices (x, JCT) of the lower-left convex hull of the complete points, by rising x.

    It runs from the lowest-x point (the best JCT there) down to the point of least JCT:
    the Pareto points (none has both more x and more JCT than another), less those above
    the segment between their neighbours. Between two vertices the hull is the straight
    line; beyond the last the least JCT holds (``interpolated_at``).
    """
    measured = sorted((getattr(p, x_attr), p.avg_jct_s) for p in points
                      if p.complete and np.isfinite(p.avg_jct_s) and np.isfinite(getattr(p, x_attr)))
    hull: list[tuple[float, float]] = []
    for x, jct in measured:
        if hull and jct >= hull[-1][1]:
            continue  # as much x or more for no less JCT: dominated
        while len(hull) >= 2 and _not_below(hull[-2], hull[-1], (x, jct)):
            hull.pop()
        hull.append((x, jct))
    return hull


def _not_below(a: tuple[float, float], b: tuple[float, float], c: tuple[float, float]) -> bool:
    """Whether ``b`` lies on or above the segment from ``a`` to ``c`` (a, b, c by rising x)."""
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]) <= 0


def interpolated_at(points: list[Point], x_attr: str, x: float) -> float:
    """The JCT at ``x`` on ``points``' lower-left convex hull (``frontier_hull``); NaN below its lowest x.

    What an interpolated point means: mixing two measured settings, a share ``t`` of the
    jobs (or of the time) under one and the rest under the other, would spend
    ``t x1 + (1 - t) x2`` and give ``t jct1 + (1 - t) jct2`` **if** the two halves did not
    change each other's waits. On a loaded cluster they do (the half that grows or defers
    jobs delays the other), and no policy here runs such a mix, so an interpolated JCT is
    an estimate of what time-sharing two settings could reach, never a measured run; the
    measured-only figure (``best_at``) stands beside it.
    """
    hull = frontier_hull(points, x_attr)
    if not hull or x < hull[0][0]:
        return float("nan")
    xs, jcts = zip(*hull)
    return float(np.interp(x, xs, jcts))


def versus_best(points: list[Point], baselines: dict[str, list[Point]], x_attr: str,
                read: Callable[[list[Point], str, float], float] = best_at) -> Versus:
    """``points``' speed-up over every complete baseline point (``Versus``); ``read`` gives their JCT at an x."""
    best, against, missed, incomplete = float("nan"), "", [], []
    for base, base_points in baselines.items():
        for p in base_points:
            if not p.complete:
                incomplete.append(f"{base} {p.setting}")
                continue
            ratio = p.avg_jct_s / read(points, x_attr, getattr(p, x_attr))
            if not np.isfinite(ratio):
                missed.append(f"{base} {p.setting}")
            elif not ratio >= best:  # also true while best is NaN
                best, against = ratio, f"{base} {p.setting}"
    return Versus(best, against, missed, incomplete)


def offered_load(workload: Workload, spec: ClusterSpec, models: ModelRegistry, options: TraceOptions) -> float:
    """The GPU-time the jobs ask for (requested GPUs x runtime at that size, full power) over the
    cluster's GPU-time while they arrive: about 1 means a FIFO cluster is just kept busy."""
    sim = Simulator(workload, spec, models, None, b"offered-load-key", options)
    asked = float((sim.requested * sim.full_runtime).sum())
    span = float(workload.submit[-1] - workload.submit[0]) if len(workload) else 0.0
    # A burst (all at once) is measured over the mean runtime instead of a zero span.
    return asked / (spec.gpus * max(span, float(sim.full_runtime.mean()) if len(workload) else 1.0))


def lower_bound_for(workload: Workload, spec: ClusterSpec, signal: CarbonSignal, models: ModelRegistry,
                    options: TraceOptions) -> LowerBound:
    """The capacity-blind carbon lower bound of ``workload`` as the simulator runs it."""
    jobs, shape = bound_inputs(workload, spec, models, options)
    return carbon_lower_bound(jobs, signal, models, shape)


def run_bench(workload: Workload, spec: ClusterSpec, signal: CarbonSignal, models: ModelRegistry, carbon_name: str,
              options: TraceOptions = TraceOptions(), policies: tuple[str, ...] = POLICY_NAMES,
              sweep: bool = True, on_run: Callable[[str], None] | None = None, min_tick_s: float = 300.0,
              max_tick_s: float = 900.0) -> BenchResult:
    runs: dict[str, RunResult] = {}
    frontier: dict[str, list[Point]] = {}
    for name in policies:
        settings = settings_of(name, options) if sweep else [("default", make_policy(name), options)]
        points = []
        for setting, policy, opts in settings:
            if on_run is not None:
                on_run(f"{name} {setting}")
            run = simulate(workload, spec, policy, signal, models, carbon_name, opts, min_tick_s, max_tick_s)
            s = run.summary
            points.append(Point(setting, s["avg_jct_s"], s["energy_kwh"], s["carbon_kg"], int(s["finished"]),
                                int(s["jobs"])))
            if setting in ("default", "budget=1", f"flex={options.flex_s / 3600:g}h", "eta=0.5"):
                runs[name] = run
        frontier[name] = points
    result = BenchResult(runs, frontier, lower_bound_for(workload, spec, signal, models, options))
    for base in BASELINES:
        if base not in runs:
            continue
        s = runs[base].summary
        if s["finished"] < s["jobs"]:
            continue  # its JCT and carbon leave the unfinished jobs out: no yardstick (see incomplete_points)
        if "greenflow" in frontier:
            result.equal_carbon[base] = s["avg_jct_s"] / best_at(frontier["greenflow"], "carbon_kg", s["carbon_kg"])
        if "powerflow" in frontier:
            result.equal_energy[base] = s["avg_jct_s"] / best_at(frontier["powerflow"], "energy_kwh", s["energy_kwh"])
    return result
