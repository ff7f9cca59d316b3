"""Slurm's power saving on the simulated nodes: a node idle for ``SuspendTime`` is suspended
(its GPUs draw nothing), and a job allocated to a suspended node waits for it to resume.

Slurm suspends a node once it has had nothing allocated for ``SuspendTime`` (through the
site's ``SuspendProgram``) and resumes it when the scheduler allocates it a job, which
starts once the node is back (within ``ResumeTimeout``). So the energy it saves is the
idle power of the nodes idle for longer than ``SuspendTime``, beyond that time, and what
it costs is a resume per job that lands on a suspended node. Here a node's idle stretches
are kept as they happen (``busy``/``idle``); the engine adds ``resume_s`` of work at the
job's rate to a job that woke a node (so its GPUs are held, and counted at the job's
power, while the node boots: more than a booting node draws, so the saving is not
overstated), and the record turns the suspended stretches into energy and carbon not
drawn (``SimRecord.finish``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class PowerSaving:
    """The nodes' idle stretches under ``suspend_after_s`` (Slurm's SuspendTime)."""

    suspend_after_s: float
    resume_s: float
    #: Per node, since when nothing is allocated on it (NaN while something is).
    idle_since: np.ndarray
    #: (from, to, GPUs) of each stretch a node spent suspended.
    suspended: list[tuple[float, float, int]] = field(default_factory=list)
    #: Jobs that had to wait for a node to resume.
    resumes: int = 0

    @classmethod
    def start(cls, nodes: int, now: float, suspend_after_s: float | None, resume_s: float) -> PowerSaving | None:
        """Every node idle from ``now``; None when the site does not suspend nodes."""
        if suspend_after_s is None:
            return None
        if not (suspend_after_s >= 0 and resume_s >= 0 and math.isfinite(suspend_after_s + resume_s)):
            raise ValueError(f"suspend after {suspend_after_s} s, resume {resume_s} s: expected finite, >= 0")
        return cls(suspend_after_s, resume_s, np.full(nodes, now, dtype=np.float64))

    def busy(self, node: int, now: float, gpus: int) -> bool:
        """``node``, idle until now, gets its first allocation: whether it was suspended (the job
        waits ``resume_s`` for it)."""
        asleep_from = float(self.idle_since[node]) + self.suspend_after_s
        self.idle_since[node] = math.nan
        if now <= asleep_from:
            return False
        self.suspended.append((asleep_from, now, gpus))
        return True

    def idle(self, node: int, now: float) -> None:
        """``node`` has nothing allocated from ``now``."""
        self.idle_since[node] = now

    def close(self, now: float, gpus_per_node: np.ndarray) -> None:
        """The nodes still idle at the end of the run: suspended until ``now`` where long enough."""
        for node in np.flatnonzero(~np.isnan(self.idle_since)).tolist():
            asleep_from = float(self.idle_since[node]) + self.suspend_after_s
            if now > asleep_from:
                self.suspended.append((asleep_from, now, int(gpus_per_node[node])))
            self.idle_since[node] = now
