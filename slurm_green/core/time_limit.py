"""The time limit a job was submitted with: what a decision that slows the job scales.

Slurm stops a job at its ``TimeLimit``. A decision that makes a job slower than its user
asked raises that limit (``actions.SetTimeLimit``, from ``controller/planner.py``), and the
policies read the job's work from the limit as submitted. Both must start from a figure the
controller's own raises cannot move, or each raise would be read back as a longer job and
raised again: the marker's (job_submit.lua keeps ``--time`` there), else the partition's
default, which the site sets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping

from slurm_green.core.cluster import ClusterSnapshot, Job
from slurm_green.core.green_options import GreenOptions, parse_marker


class PartitionTimes(Mapping[str, "float | None"]):
    """A time per partition name (None: unlimited), that also answers for a job's partition list.

    A job submitted to several partitions (``sbatch -p gpu,long``) names them all in its
    ``Partition`` until it starts, in whichever can run it first. Its entry is ``combine``
    over the listed partitions this snapshot knows (the unlimited ones left out; None when
    all are), found once and kept: ``partition_max_times`` takes the smallest ``MaxTime``, so
    a raise fits every partition it may start in, ``partition_limits`` the largest default,
    so a limit scaled from it is never short. A list naming none of them is unknown (a
    ``KeyError``, ``get``'s default), as an unknown partition is.
    """

    def __init__(self, by_name: dict[str, float | None], combine: Callable[[list[float]], float]) -> None:
        self._by_name = by_name
        self._combine = combine

    def __getitem__(self, name: str) -> float | None:
        try:
            return self._by_name[name]
        except KeyError:
            if "," not in name:
                raise
        listed = [self._by_name[part] for part in name.split(",") if part in self._by_name]
        if not listed:
            raise KeyError(name)
        limited = [value for value in listed if value is not None]
        value = self._by_name[name] = self._combine(limited) if limited else None
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


def partition_limits(snapshot: ClusterSnapshot) -> PartitionTimes:
    """Per partition name (and ``""``: the default partition's), the limit a job submitted
    without ``--time`` gets there: its ``DefaultTime``, else its ``MaxTime`` (None: unlimited)."""
    limits: dict[str, float | None] = {}
    for partition in snapshot.partitions:
        limit = partition.default_time_s or partition.max_time_s
        limits[partition.name] = limit
        if partition.default:
            limits[""] = limit
    return PartitionTimes(limits, max)


def partition_max_times(snapshot: ClusterSnapshot) -> PartitionTimes:
    """Per partition name, its ``MaxTime`` (None: unlimited): no raise goes past it."""
    return PartitionTimes({partition.name: partition.max_time_s for partition in snapshot.partitions}, min)


def whole_minutes_s(seconds: float) -> float:
    """``seconds`` up to whole minutes (Slurm's resolution), in seconds; a float's
    rounding error above a whole minute does not add one."""
    return math.ceil(seconds / 60.0 - 1e-9) * 60.0


def limit_as_submitted(job: Job, options: GreenOptions, partition_limits: Mapping[str, float | None]) -> float | None:
    """The time limit the job was submitted with: the marker's (``--time``, kept by job_submit.lua
    where users cannot change it), else its partition's default (``partition_limits``); None when
    neither is known.

    Never the job's limit now: the controller raises the limit of a job its decision slows
    (``SetTimeLimit``), and read back as the job's work that raised limit would make the next
    decision slower still, and the limit with it, tick after tick. A site that changes a
    partition's ``DefaultTime`` while jobs wait changes what their limits are scaled from."""
    return options.time_limit_s or partition_limits.get(job.partition or "")


def asked_limit(job: Job, partition_limits: Mapping[str, float | None]) -> float | None:
    """``limit_as_submitted`` for a job the controller manages; None for a job without the
    marker (job_submit.lua never saw it, so nothing it asked is known) or without a known limit."""
    options = parse_marker(job.admin_comment)
    return limit_as_submitted(job, options, partition_limits) if options is not None else None


def outruns_max_time(run_s: float | None, asked_s: float | None, max_time_s: float | None) -> bool:
    """Whether a job submitted with limit ``asked_s`` and expected to run ``run_s`` would be
    stopped at its partition's ``MaxTime``: its limit raised to the run, in whole minutes (as
    the planner sets it), above both ``MaxTime`` and the limit it had anyway. False without a
    ``MaxTime``, a known limit or a finite run: then nothing is known to stop it."""
    if not max_time_s or asked_s is None or run_s is None or not math.isfinite(run_s):
        return False
    return whole_minutes_s(run_s) > max(max_time_s, asked_s)


def slowed_past_max_time(job: Job, run_s: float | None, partition_limits: Mapping[str, float | None],
                         max_times: Mapping[str, float | None], stretch: float | None = None) -> bool:
    """Whether ``job``, expected to run ``run_s`` (or, given ``stretch``, its limit as submitted
    times that: a running job slowed from now on), would be stopped at its partition's
    ``MaxTime`` (``outruns_max_time``). The one rule the planner holds every decision to and
    the policies that co-locate plan within."""
    bound = max_times.get(job.partition)  # read first: most partitions have none, and markers cost a parse
    if not bound:
        return False
    asked = asked_limit(job, partition_limits)
    run = asked * stretch if asked is not None and stretch is not None else run_s
    return outruns_max_time(run, asked, bound)
