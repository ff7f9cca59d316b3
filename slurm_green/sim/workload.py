"""A workload: the jobs of a trace as columns, independent of the file they came from.

Each job has a submit time (POSIX seconds), a requested GPU count, a job type (the
name the models resolve) and its size, either as *work* in the type's own units
(steps, samples) or as a *duration* at the requested configuration at full power;
the simulator turns a duration into work with the models, so that a different GPU
count or power cap changes the runtime as the models say.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Workload:
    name: str
    submit: np.ndarray  #: POSIX seconds, sorted ascending
    gpus: np.ndarray  #: requested GPUs
    job_type: tuple[str, ...]
    work: np.ndarray  #: work units, NaN where the size is a duration
    duration_s: np.ndarray  #: seconds at the requested configuration, NaN where the size is work
    #: Each job's Slurm time limit (s) where the source states it, NaN (or None: all) where the
    #: simulator derives it from the runtime (``TraceOptions.time_limit_factor``).
    time_limit_s: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.submit)
        if not (len(self.gpus) == len(self.job_type) == len(self.work) == len(self.duration_s) == n) or (
                self.time_limit_s is not None and len(self.time_limit_s) != n):
            raise ValueError("workload columns differ in length")
        if n and np.any(np.diff(self.submit) < 0):
            raise ValueError("workload must be sorted by submit time")

    def __len__(self) -> int:
        return len(self.submit)

    @classmethod
    def from_columns(cls, name: str, submit: np.ndarray, gpus: np.ndarray, job_type: list[str],
                     work: np.ndarray | None = None, duration_s: np.ndarray | None = None,
                     time_limit_s: np.ndarray | None = None) -> "Workload":
        """Sort by submit time (stable: equal times keep their order, as job ids do) and fill the
        absent size column with NaN."""
        order = np.argsort(np.asarray(submit, dtype=np.float64), kind="stable")
        nan = np.full(len(order), np.nan)
        return cls(
            name=name,
            submit=np.asarray(submit, dtype=np.float64)[order],
            gpus=np.maximum(np.asarray(gpus, dtype=np.int64)[order], 1),
            job_type=tuple(job_type[i] for i in order),
            work=nan if work is None else np.asarray(work, dtype=np.float64)[order],
            duration_s=nan if duration_s is None else np.asarray(duration_s, dtype=np.float64)[order],
            time_limit_s=None if time_limit_s is None else np.asarray(time_limit_s, dtype=np.float64)[order],
        )

    def head(self, count: int) -> "Workload":
        """The first ``count`` jobs (for quick runs)."""
        return Workload(self.name, self.submit[:count], self.gpus[:count], self.job_type[:count],
                        self.work[:count], self.duration_s[:count],
                        None if self.time_limit_s is None else self.time_limit_s[:count])

    def resampled(self, count: int, seed: int) -> "Workload":
        """A new workload like this one: a window of ``count`` consecutive arrivals at a random
        place, each arrival given a job (size, GPUs, type) drawn with replacement from that window.

        The window keeps the trace's own arrival pattern (bursts, quiet hours) and job mix
        at that time; the draw makes a workload the policies have not been tuned on.
        Deterministic in ``seed``.
        """
        if count <= 0:
            raise ValueError(f"count must be positive, not {count}")
        rng = np.random.default_rng(seed)
        n = len(self)
        take = min(count, n)
        first = int(rng.integers(0, n - take + 1))
        window = np.arange(first, first + take)
        jobs = rng.choice(window, size=take, replace=True)
        return Workload(f"{self.name}-s{seed}", self.submit[window], self.gpus[jobs],
                        tuple(self.job_type[j] for j in jobs.tolist()), self.work[jobs], self.duration_s[jobs],
                        None if self.time_limit_s is None else self.time_limit_s[jobs])

    def arrivals_scaled(self, factor: float) -> "Workload":
        """The same jobs arriving ``factor`` times as fast (offsets from the first arrival divided
        by it): the offered load times ``factor`` on the same cluster."""
        if not factor > 0:
            raise ValueError(f"factor must be positive, not {factor}")
        if not len(self):
            return self
        first = self.submit[0]
        return Workload(self.name, first + (self.submit - first) / factor, self.gpus, self.job_type, self.work,
                        self.duration_s, self.time_limit_s)
