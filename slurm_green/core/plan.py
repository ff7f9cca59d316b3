"""What a policy returns: one decision per managed job, each with its reason.

A decision is the policy's intent ("start this job at 14:00 on 4 GPUs capped at
70 %"); turning it into backend actions, and skipping what is already in force, is
the controller's job, so policies stay pure and easy to test on literals.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, fields
from typing import Literal, Protocol

from slurm_green.core.decision import DecisionContext


@dataclass(frozen=True, slots=True)
class JobDecision:
    """The policy's choice for one pending job.

    ``start_at`` is the earliest start (POSIX seconds); ``None`` or a time not after
    ``now`` means "release now". ``gpus_per_node``/``num_nodes`` of ``None`` keep the
    job's request. ``power_cap_fraction`` is a fraction of the board's maximum power
    limit (the node's Prolog turns it into watts, clamped to the board's range).
    ``nodes`` pins a placement (network packing, buddy blocks); ``None`` leaves it to
    the backend's own scheduler. ``share_with`` names a job whose GPUs this one may share (co-location).
    ``model_params`` names the model parameters the decision was made with (the registry's
    ``params_id``), so a stored decision can be traced to the models behind it.
    ``model_assumed`` says what those models assumed for this job rather than fitted: "" nothing
    (its job type and GPU type are modelled), else why (its name matches no modelled job type,
    its GPU type was not profiled); ``None``: not recorded.
    ``energy_as_asked_kwh`` is the job's energy as the user asked (requested GPUs, no cap):
    what the decided configuration's ``expected_energy_kwh`` saves is measured against it.
    ``gpu_type`` is the GPU type the decision was planned for (its models and caps);
    ``None``: the registry's own type, on nodes that report no type.
    ``partner_stretch``, for a job joining the GPU of a **running** job (``share_with``): how many
    times longer that job's run becomes beside it (its co-location slowdown over its cap's
    rate), so that the planner raises the running job's time limit with it; None: no raise.
    """

    job_id: int
    start_at: float | None = None
    gpus_per_node: int | None = None
    num_nodes: int | None = None
    nodes: tuple[str, ...] | None = None
    power_cap_fraction: float | None = None
    share_with: int | None = None
    reason: str = ""
    expected_runtime_s: float | None = None
    expected_energy_kwh: float | None = None
    expected_carbon_kg: float | None = None
    carbon_if_now_kg: float | None = None
    model_params: str | None = None
    model_assumed: str | None = None
    energy_as_asked_kwh: float | None = None
    gpu_type: str | None = None
    partner_stretch: float | None = None


_DECISION_FIELDS = tuple(f.name for f in fields(JobDecision))
_DECISION_VALUES = operator.attrgetter(*_DECISION_FIELDS)
_DECISION_POSITION = {name: i for i, name in enumerate(_DECISION_FIELDS)}


def replace_decision(decision: JobDecision, **changes: object) -> JobDecision:
    """``dataclasses.replace`` for ``JobDecision`` without its per-call introspection (the
    controller stamps every decision of every tick): the same fields, the same new object."""
    values = list(_DECISION_VALUES(decision))
    for name, value in changes.items():
        values[_DECISION_POSITION[name]] = value
    return JobDecision(*values)


@dataclass(frozen=True, slots=True)
class Price:
    """What a plan's budget made a unit of its resource worth: seconds of summed JCT per kg
    CO2 (``carbon``) or per kWh (``energy``), the multiplier GreenFlow and PowerFlow chose.
    A wrapper deciding running jobs (``policy/running.py``) trades by it, so running and
    pending jobs are weighed in one cost; 0 where no budget binds."""

    seconds_per_unit: float
    resource: Literal["carbon", "energy"]


@dataclass(frozen=True, slots=True)
class Plan:
    decisions: tuple[JobDecision, ...] = ()
    notes: tuple[str, ...] = field(default=())
    #: (GPU type, price) of each pool the policy priced (None: the untyped cluster's); empty
    #: where it set none (no budget, or nothing pending to price).
    prices: tuple[tuple[str | None, Price], ...] = ()

    def price_for(self, gpu_type: str | None) -> Price | None:
        """The price of ``gpu_type``'s pool; a cluster priced as one pool has one for every type."""
        for kind, price in self.prices:
            if kind == gpu_type or len(self.prices) == 1:
                return price
        return None


class Policy(Protocol):
    """A pure function of what is known now (``DecisionContext``); no I/O, no clock of its own.

    Without a forecast (``context.forecast is None``) a policy must behave carbon-agnostically.
    """

    @property
    def name(self) -> str: ...

    def __call__(self, context: DecisionContext) -> Plan: ...
