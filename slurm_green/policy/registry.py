"""Every policy by name, built from plain settings: one registry for the controller and the simulator.

The controller's configuration (``controller/config.py``) validates ``[policy]`` (its
defaults are ``PolicyKnobs``'s) and hands it here; the simulator's bench builds the same
policies from ``PolicyKnobs`` (``sim/bench.py``: its labels are registry names with some
knobs set, e.g. ``window+cap`` is ``window`` at cap 0.7). This module imports nothing of
the controller, so the configuration can take its list of names from ``POLICY_NAMES``
without an import cycle (it used to: config -> assemble -> registry -> config).

GreenFlow and PowerFlow take ``budget_fraction``: a plan may spend that fraction of the
carbon (PowerFlow: energy) the same jobs would spend run the carbon-agnostic way
(requested GPUs, full power, started now). At 1.0 the plan is never worse than the
carbon-agnostic plan on GreenFlow's objective, and a looser budget on the same side of 1
never gives a worse one (``policy/greenflow/``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol

from slurm_green.core.plan import Policy
from slurm_green.policy.baselines import FifoPolicy, ZeusCapPolicy
from slurm_green.policy.eaco import EaCoPolicy
from slurm_green.policy.greenflow import GreenFlowPolicy, powerflow
from slurm_green.policy.priced_sharing import Colocation
from slurm_green.policy.running import resizing
from slurm_green.policy.placement.site import check_weights
from slurm_green.policy.window import WindowPolicy
from slurm_green.policy.window_aware import CapacityAwareWindowPolicy


class PolicySettings(Protocol):
    """What a policy is built from: ``[policy]`` of the controller's configuration, or ``PolicyKnobs``."""

    @property
    def name(self) -> str: ...
    @property
    def cap_fraction(self) -> float | None: ...
    @property
    def default_runtime_h(self) -> float: ...
    @property
    def budget_fraction(self) -> float: ...
    @property
    def place_nodes(self) -> bool: ...
    @property
    def gpu_time_slack(self) -> float: ...
    @property
    def runtime_slack(self) -> float: ...
    @property
    def growth_horizon_h(self) -> float: ...
    @property
    def budget_slack(self) -> float: ...
    @property
    def eta(self) -> float: ...
    @property
    def placement(self) -> Mapping[str, float] | tuple[tuple[str, float], ...]: ...
    @property
    def colocate(self) -> bool: ...


@dataclass(frozen=True)
class PolicyKnobs:
    """The settings with their defaults (the configuration's ``[policy]`` takes them from here)."""

    name: str = "window"
    #: window: the fixed GPU power cap, a fraction of the board's maximum (None: uncapped).
    cap_fraction: float | None = 0.7
    default_runtime_h: float = 1.0
    budget_fraction: float = 1.0
    place_nodes: bool = True
    gpu_time_slack: float = 0.1
    runtime_slack: float = 0.25
    growth_horizon_h: float = 2.0
    #: greenflow/powerflow: a budget is held no tighter than the least carbon (energy) a plan
    #: reaches plus this fraction of the carbon-agnostic plan's.
    budget_slack: float = 0.05
    #: zeus: 1 weighs only energy, 0 only time.
    eta: float = 0.5
    #: greenflow/powerflow: placement plugin weights for one-node jobs (``placement/site.py``);
    #: empty: the fullest node with a fitting block.
    placement: tuple[tuple[str, float], ...] = ()
    #: greenflow/powerflow: a job the plan does not start now may share a one-GPU job's GPU
    #: where that costs less (``policy/priced_sharing.py``; both jobs must allow sharing).
    colocate: bool = False


def _fifo(settings: PolicySettings) -> Policy:
    return FifoPolicy()


def _zeus(settings: PolicySettings) -> Policy:
    return ZeusCapPolicy(eta=settings.eta)


def _window(settings: PolicySettings, kind: type[WindowPolicy] = WindowPolicy) -> Policy:
    return kind(cap_fraction=settings.cap_fraction, default_runtime_s=settings.default_runtime_h * 3600.0)


def _flow(policy: GreenFlowPolicy, settings: PolicySettings) -> Policy:
    """GreenFlow or PowerFlow with the live knobs of ``settings``."""
    return replace(policy, budget_fraction=settings.budget_fraction,
                   default_runtime_s=settings.default_runtime_h * 3600.0, place=settings.place_nodes,
                   gpu_time_slack=settings.gpu_time_slack, runtime_slack=settings.runtime_slack,
                   growth_horizon_s=settings.growth_horizon_h * 3600.0, budget_slack=settings.budget_slack,
                   placement=tuple(check_weights(dict(settings.placement)).items()),
                   colocation=Colocation() if settings.colocate else None)


def _greenflow(settings: PolicySettings) -> Policy:
    return _flow(GreenFlowPolicy(), settings)


def _powerflow(settings: PolicySettings) -> Policy:
    # powerflow() is PowerFlow's one definition (GreenFlow on energy); only the live knobs change.
    return _flow(powerflow(), settings)


def _icefrog(settings: PolicySettings) -> Policy:
    # GreenFlow for pending jobs; running elastic jobs grown and shrunk on effective progress.
    return resizing(_greenflow(settings), energy_slack=settings.gpu_time_slack, shrink=True, label="icefrog")


def _eaco(settings: PolicySettings) -> Policy:
    return EaCoPolicy(default_runtime_s=settings.default_runtime_h * 3600.0)


_BUILDERS: dict[str, Callable[[PolicySettings], Policy]] = {
    "window": _window,
    "window-aware": partial(_window, kind=CapacityAwareWindowPolicy),
    "fifo": _fifo,
    "zeus": _zeus,
    "greenflow": _greenflow,
    "powerflow": _powerflow,
    "eaco": _eaco,
    "icefrog": _icefrog,
}
#: What ``[policy] name`` and the simulator accept.
POLICY_NAMES: tuple[str, ...] = tuple(_BUILDERS)


def make_policy(settings: PolicySettings) -> Policy:
    """The policy ``settings.name`` with these settings.

    ``fifo`` releases every job as asked (carbon-agnostic Slurm: a site's measuring mode);
    ``window`` starts each job in its own cleanest window (capacity-blind, as CATS users do),
    ``window-aware`` in the cleanest one that still has GPU-time for it
    (``policy/window_aware.py``);
    ``zeus`` caps each job at its type's energy-time optimum (``eta``); ``cap_fraction`` is
    the window policy's fixed power cap (GreenFlow and PowerFlow choose each job's cap
    themselves); ``budget_fraction``, ``place_nodes`` (pin jobs started now to nodes, enacted
    as ``ReqNodeList``) and the three guards (``GreenFlowPolicy._guard``) are GreenFlow's and
    PowerFlow's. ``eaco`` co-locates jobs that accept sharing at its defaults (slowdown
    bound 1.25, 2 jobs per GPU). ``icefrog`` is GreenFlow (its budget and guards) that also
    grows running elastic jobs into idle GPUs and shrinks one for the queue's blocked head,
    each rated by its effective progress at the frozen share its helper reports
    (``policy/running.py``); on a cluster it needs ``[elastic] requeue``.
    """
    builder = _BUILDERS.get(settings.name)
    if builder is None:
        raise ValueError(f"unknown policy {settings.name!r}; choose from {', '.join(POLICY_NAMES)}")
    return builder(settings)
