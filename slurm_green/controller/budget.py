"""A carbon (or energy) budget per day or week, kept tick by tick with what already ran.

GreenFlow and PowerFlow budget each *decision*: a plan may spend ``budget_fraction`` times
what the same jobs would spend run the carbon-agnostic way. A site states its budget in
absolute terms per period ("managed jobs' GPUs emit at most 400 kg CO2eq a day"). This
module turns the second into the first at each tick, from what the store accounted this
period (``StateStore.spent``: the GPUs' energy and its carbon, job by job as they ran):

    scale = (limit - spent) / (limit x (1 - elapsed share of the period))

the allowance left over what a steady pace would have left. On pace the policy plans at its
configured fraction (scale 1); ahead of pace the fraction tightens, behind it loosens,
within ``[min_scale, max_scale]``; at or over the limit it is ``min_scale``. It is a pacing
rule, not a guarantee: a budget below what the jobs need even at their cheapest is not held
(jobs still start by their deadlines; nothing is held back for a budget), and the pace is
steady over the period although load and the grid are not. ``slurm-green budget`` shows
each period's adherence, so a site sees which of the two it got.

Stateless on purpose: everything comes from the store, so a controller killed and started
again mid-period paces exactly as if it had run through.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal, Protocol
from zoneinfo import ZoneInfo

from slurm_green.controller.store import Spent

Period = Literal["day", "week"]
Resource = Literal["carbon", "energy"]


class SpendLedger(Protocol):
    """What ran, accounted (``controller.store.StateStore``)."""

    def spent(self, start: float, end: float) -> Spent: ...


def period_bounds(now: float, period: Period, zone: ZoneInfo) -> tuple[float, float]:
    """The period holding ``now``: from local midnight (a week's on Monday) to the next one.

    Local wall-clock arithmetic, so a day of a DST change is 23 or 25 h long, as a site's
    day is. ``fold=0`` picks a repeated midnight's first instant (Cuba falls back from 01:00
    to 00:00): ``now`` in the hour's second pass keeps ``fold=1``, which would start that
    day an hour late and give it two different periods. A midnight that a spring-forward
    skips (fold 0, the offset before the change) is the day's first instant, 01:00."""
    local = dt.datetime.fromtimestamp(now, zone)
    start = local.replace(hour=0, minute=0, second=0, microsecond=0, fold=0)
    if period == "week":
        start -= dt.timedelta(days=local.weekday())
    end = start + dt.timedelta(days=7 if period == "week" else 1)
    return start.timestamp(), end.timestamp()


@dataclass(frozen=True)
class BudgetStatus:
    """One period's budget at one moment: its bounds, limit, what was spent, the scale it gives."""

    start: float
    end: float
    resource: Resource
    limit: float  #: kg CO2eq (carbon) or kWh (energy) per period
    spent: float
    jobs: int
    scale: float

    @property
    def unit(self) -> str:
        return "kg" if self.resource == "carbon" else "kWh"

    def elapsed(self, now: float) -> float:
        return min(1.0, max(0.0, (now - self.start) / (self.end - self.start)))

    def note(self, now: float) -> str:
        return (f"budget: {self.spent:.3g} of {self.limit:.3g} {self.unit} spent with {self.elapsed(now):.0%} of the "
                f"period gone; plans at {self.scale:.2f} x the configured fraction")


@dataclass(frozen=True)
class PeriodBudget:
    """The site's budget: ``limit`` of ``resource`` per ``period`` starting at midnight in ``zone``."""

    resource: Resource
    limit: float
    period: Period = "day"
    zone: ZoneInfo = ZoneInfo("UTC")
    min_scale: float = 0.5
    max_scale: float = 2.0

    def status(self, ledger: SpendLedger, now: float) -> BudgetStatus:
        start, end = period_bounds(now, self.period, self.zone)
        used = ledger.spent(start, end)
        spent = used.carbon_kg if self.resource == "carbon" else used.energy_kwh
        return BudgetStatus(start, end, self.resource, self.limit, spent, used.jobs,
                            self.pace(spent, (now - start) / (end - start)))

    def pace(self, spent: float, elapsed: float) -> float:
        """The module docstring's scale for ``spent`` after an ``elapsed`` share of the period."""
        left = self.limit - spent
        if left <= 0:
            return self.min_scale
        on_pace = self.limit * (1.0 - min(1.0, max(0.0, elapsed)))
        if on_pace <= 0:
            return self.max_scale
        return min(self.max_scale, max(self.min_scale, left / on_pace))

    def history(self, ledger: SpendLedger, now: float, periods: int) -> list[BudgetStatus]:
        """The last ``periods`` periods up to the one holding ``now``, oldest first (adherence)."""
        out: list[BudgetStatus] = []
        moment = now
        for _ in range(periods):
            out.append(self.status(ledger, moment))
            moment = out[-1].start - 1.0
        return out[::-1]
