"""What a policy decides from: one typed context per decision, and the memo that outlives it.

A policy is a pure function of ``DecisionContext``. Deciding again on a cluster that
barely changed repeats work (parsing the same jobs, reading the same nodes, asking the
models the same questions), so a policy may keep such derived facts in ``memo``: one
``DecisionMemo`` per controller (or simulated run), created once and handed over at
every tick. What it keeps is checked against what it was derived from (the very same
immutable objects, the registry's ``revision``) before it is reused, so a decision with
a fresh memo is the same decision, only slower. Keeping it on the controller instead of
in module globals means two controllers in one process (a benchmark's runs, the tests)
never see each other's entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar, cast

from slurm_green.core.cluster import ClusterSnapshot
from slurm_green.core.forecast import CarbonForecast
from slurm_green.core.models import ModelRegistry
from slurm_green.core.progress import JobProgress, MeasuredRate

_T = TypeVar("_T")


class DecisionMemo:
    """Derived facts kept between one controller's decisions, one entry per kind.

    Each policy module defines the kinds it keeps (a small class whose instances start
    empty) and asks ``get(Kind)``; ``core`` needs to know none of them.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[type, object] = {}

    def get(self, kind: type[_T]) -> _T:
        """This memo's ``kind`` entry, made with ``kind()`` on first use."""
        entry = self._entries.get(kind)
        if entry is None:
            entry = self._entries[kind] = kind()
        return cast(_T, entry)


@dataclass(frozen=True, slots=True)
class DecisionContext:
    """Everything a policy may read: the cluster now, the carbon forecast (``None`` when no
    source answered: decide carbon-agnostically), the models, the time (POSIX seconds) and
    the controller's memo (see the module docstring). ``budget_scale`` multiplies the budget a
    policy plans under (GreenFlow's and PowerFlow's ``budget_fraction``): how a site's budget per
    period, paced tick by tick (``controller/budget.py``), reaches one decision; policies
    without a budget ignore it. ``progress``: the latest reports of running elastic jobs that
    send them (``core/progress.py``), by job id; written by the jobs' users, so a policy may
    let a job's report shorten that job's own estimates, never move another job's.
    ``measured``: the rates those reports gave at each GPU count a running elastic job ran
    with, by job id (``models/measured.py``: how the job really scales; the same rule holds)."""

    snapshot: ClusterSnapshot
    forecast: CarbonForecast | None
    models: ModelRegistry
    now: float
    memo: DecisionMemo
    budget_scale: float = 1.0
    progress: Mapping[int, JobProgress] = field(default_factory=dict)
    measured: Mapping[int, tuple[MeasuredRate, ...]] = field(default_factory=dict)
