"""The one interface a cluster offers the controller: look, then change pending jobs.

The Slurm adapter and the simulator both implement it, so the controller's
``tick(now)`` runs unchanged on a real cluster and on a trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from slurm_green.core.actions import Action, ActionResult
from slurm_green.core.cluster import ClusterSnapshot


@runtime_checkable
class ClusterBackend(Protocol):
    def snapshot(self) -> ClusterSnapshot:
        """A consistent view of jobs, nodes and partitions, at a fixed small cost."""
        ...

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        """Carry out actions in order; one result per action, in the same order."""
        ...
