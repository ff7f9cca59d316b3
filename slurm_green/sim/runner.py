"""One simulated run: a workload, a cluster, a carbon series, a policy and the real controller.

``Controller.tick(now)`` is the production code path; only its backend (the
simulator), its clock and its carbon feed are simulated. Decisions are signed with
a per-run simulation key and verified by the simulated Prolog, as on a real site.
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from slurm_green.carbon.signal import CarbonSignal
from slurm_green.controller.budget import PeriodBudget
from slurm_green.controller.resize import Resizer, ResizeSettings
from slurm_green.controller.store import StateStore
from slurm_green.controller.tick import Controller, TickReport
from slurm_green.core import decision_token
from slurm_green.core.models import ModelRegistry
from slurm_green.core.plan import Policy
from slurm_green.sim.carbon import SimCarbonFeed
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import SimProgress, Simulator, TraceOptions
from slurm_green.sim.metrics import SimRecord
from slurm_green.sim.workload import Workload


@dataclass
class RunResult:
    policy: str
    summary: dict[str, float]
    record: SimRecord
    ticks: int
    wall_s: float


class _CountingController(Controller):
    ticks: int = 0

    def tick(self, now: float) -> TickReport:
        self.ticks += 1
        return super().tick(now)


def simulate(workload: Workload, spec: ClusterSpec, policy: Policy, signal: CarbonSignal, models: ModelRegistry,
             carbon_name: str = "carbon", options: TraceOptions = TraceOptions(), min_tick_s: float = 300.0,
             max_tick_s: float = 900.0, on_progress: Callable[[int], None] | None = None,
             truth: ModelRegistry | None = None, learn: bool = False, budget: PeriodBudget | None = None,
             store: StateStore | None = None, resize: ResizeSettings | None = None) -> RunResult:
    """Run ``policy`` through the controller over ``workload``.

    ``models`` is what the controller believes; ``truth`` how jobs really run (default: the
    same models). With ``learn`` each finished job's true throughput and power reach the
    controller as telemetry and refine ``models`` (which it then changes) online. With
    ``resize`` the controller resizes running elastic jobs (``controller/resize.py``: what a
    policy wrapped in ``GrowRunning`` decides), by the simulated training helper's
    checkpoints (``TraceOptions.accept_requeue`` says which jobs run it).
    """
    key = secrets.token_bytes(32)
    # The planner re-verifies every pending job's token each tick and the simulated Prolog once at
    # start; the answer only depends on (job, token), so it is memoised and shared (a failure
    # raises again, it is never cached).
    verify = functools.lru_cache(maxsize=1 << 16)(functools.partial(decision_token.verify, key))
    sim = Simulator(workload, spec, truth if truth is not None else models, signal, key, options, verify=verify,
                    telemetry=learn)
    feed = SimCarbonFeed(signal, carbon_name, horizon_s=max(7 * 86400.0, 2 * options.flex_s))
    if store is None and (budget is not None or resize is not None):
        store = StateStore(":memory:")
    controller = _CountingController(
        backend=sim, policy=policy, carbon=feed, models=models,
        sign=functools.partial(decision_token.sign, key), verify=verify, telemetry=sim if learn else None,
        store=store, budget=budget,
        resizer=Resizer(store, SimProgress(sim), resize) if store is not None and resize is not None else None)
    began = time.perf_counter()
    record = sim.run(controller, min_tick_s=min_tick_s, max_tick_s=max_tick_s, on_progress=on_progress,
                     tick_while_running=resize is not None)
    wall = time.perf_counter() - began
    return RunResult(policy.name, record.summary(workload.submit), record, controller.ticks, wall)
