"""GreenFlow's objective: the queue estimate every plan is scored by.

A plan's objective (``_expected_cost_s``, seconds of JCT summed over the pending jobs) is the
jobs' expected completion times, played as a backfilling Slurm plays them
(``expected_completion_s``: admitted jobs start now, the others as running and planned jobs
end by their time limits, oldest first), plus what its GPU-seconds make the jobs still to come
wait. ``score`` adds the plan's spend as queued: each job's carbon at the forecast's mean over
its run where the estimate runs it (``_queued_intensity``). The lower bound
``enactment_lower_bound_s`` lets ``GreenFlowPolicy._solve`` skip the candidates that cannot win
without placing or scoring them.
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass

import numpy as np

from slurm_green.core.cluster import ClusterSnapshot, Job, JobState
from slurm_green.core.decision import DecisionMemo
from slurm_green.core.forecast import CarbonForecast
from slurm_green.policy.eaco import named_partner
from slurm_green.policy.greenflow.options import Choice, Options


@dataclass(frozen=True)
class Queue:
    """What the objective needs of the cluster: free and usable GPUs, running jobs' releases."""

    free_gpus: int
    gpus_total: int
    releases: list[tuple[float, int]]  #: ``running_releases`` (sorted)


@dataclass
class _RunningMemo:
    """(job tuple, (EndTime or None, GPUs) of its running jobs with GPUs) of the last snapshot, in
    a controller's memo: a simulator hands over the same tuple while no job changed (the held
    reference keeps the identity check sound)."""

    last: tuple[tuple[Job, ...], list[tuple[float | None, int]]] | None = None


def running_releases(snapshot: ClusterSnapshot, now: float,
                     memo: DecisionMemo | None = None) -> list[tuple[float, int]]:
    """(seconds from now until it ends by its time limit, GPUs) of each running job, sorted
    (the order a heap of them pops in).

    What Slurm itself plans with: a running job's EndTime is its start plus its limit.
    A job past its limit (or without one) is taken to end now.
    """
    held = memo.get(_RunningMemo) if memo is not None else _RunningMemo()
    if held.last is None or held.last[0] is not snapshot.jobs:
        running = JobState.RUNNING
        ends: list[tuple[float | None, int]] = []
        shard_jobs = []
        for job in snapshot.jobs:  # one pass: a simulator's snapshot holds every active job, at every tick
            if job.state is running:
                gpus = job.num_nodes * job.gpus_per_node
                if gpus > 0:
                    ends.append((job.end_time, gpus))
                elif job.shards_per_node > 0 and not job.gpus_per_node:
                    shard_jobs.append(job)
        if shard_jobs:
            ends.extend(_shard_releases(shard_jobs))
        held.last = (snapshot.jobs, ends)
    # ``end - now`` is positive exactly when ``end > now`` (a float difference is 0 only between
    # equals): the same values as ``max(0.0, end - now)``, without a call per job.
    out = [(end - now if end is not None and end > now else 0.0, gpus) for end, gpus in held.last[1]]
    out.sort()
    return out


def _shard_releases(shard_jobs: list[Job]) -> list[tuple[float | None, int]]:
    """(EndTime, GPUs) of the GPUs running jobs hold on shards (co-located pairs): one GPU per
    node, freed when the last job on it ends; a pair is two jobs of the same nodes either of
    whose decision tokens names the other (``eaco``'s rule). A job without an EndTime counts
    as ending now, as in ``running_releases``."""
    by_id = {job.job_id: job for job in shard_jobs}
    group: dict[int, int] = {}
    for job in shard_jobs:
        partner = by_id.get(named_partner(job) or -1)
        if partner is not None and partner.nodes == job.nodes and partner.job_id != job.job_id:
            root = min(group.get(job.job_id, job.job_id), group.get(partner.job_id, partner.job_id))
            group[job.job_id] = group[partner.job_id] = root
    ends: dict[int, tuple[float | None, int]] = {}
    for job in shard_jobs:
        root = group.get(job.job_id, job.job_id)
        end, nodes = ends.get(root, (None, job.num_nodes))
        if job.end_time is not None:
            end = job.end_time if end is None else max(end, job.end_time)
        ends[root] = (end, nodes)
    return list(ends.values())


@dataclass(frozen=True)
class Scored:
    """What one enacted plan is judged by: its objective and its spend as queued."""

    cost_s: float  #: ``_expected_cost_s``
    spent: float  #: carbon (energy) with each job at ``intensity``
    intensity: np.ndarray  #: [N] see ``Solution.intensity``


def score(o: Options, choice: Choice, queue: Queue, crowd: int) -> Scored:
    """``choice``'s objective, and its spend with every job at its ``_queued_intensity``."""
    forecast = o.forecast
    ends = None if forecast is None else [0.0] * len(o.rows)
    cost = _expected_cost_s(o, choice, queue, crowd, ends)
    intensity = (o.intensity[o.rows, choice.start] if forecast is None
                 else _queued_intensity(o, choice, np.asarray(ends), forecast))
    return Scored(cost, float((o.energy_kwh[o.rows, choice.col, choice.cap] * intensity).sum()), intensity)


def _expected_cost_s(o: Options, choice: Choice, queue: Queue, crowd: int,
                     ends: list[float] | None = None) -> float:
    """The objective every plan is scored by (seconds of JCT, summed over jobs).

    The pending jobs' expected completion times after now (``expected_completion_s``)
    plus what the plan's GPU-seconds cost the jobs still to come: each GPU-second a
    plan holds delays a job queued behind it by 1/``gpus_total`` s, and ``crowd`` (the
    jobs the carbon-agnostic plan cannot start now) is taken as the queue later
    arrivals will join. Without it a cap (-36 % power, -18 % speed) looks free on a busy
    cluster, and the 22 % more GPU-time it holds makes everyone arriving later wait.
    With no queue the term is zero: nothing waits for those GPU-seconds. Each job's expected
    completion goes into ``ends`` if given.
    """
    completion = expected_completion_s(o, choice, queue.free_gpus, queue.releases, ends)
    if not crowd:
        return completion
    return completion + _crowd_delay_s(o.gpus[choice.col] * o.runtime[o.rows, choice.col, choice.cap], queue, crowd)


def _crowd_delay_s(gpu_s: np.ndarray, queue: Queue, crowd: int) -> float:
    """What the jobs still to come wait for GPU-seconds ``gpu_s`` held (``_expected_cost_s``)."""
    return crowd * float(gpu_s.sum()) / max(queue.gpus_total, 1)


def enactment_lower_bound_s(o: Options, choice: Choice, queue: Queue, crowd: int) -> float:
    """A lower bound on ``_expected_cost_s`` of ``choice`` however ``GreenFlowPolicy._enact`` places it.

    Enacting only changes the jobs starting now: each starts at a size its chain allows or
    queues at its request. So each of those completes no sooner than its fastest column at its
    cap and holds no fewer GPU-seconds than its least; every other job keeps its configuration
    and completes no sooner than its start's wait plus its runtime.
    """
    rows = o.rows
    starting = choice.admitted & (choice.start == 0)
    runtime = o.runtime[rows, choice.col, choice.cap]
    fastest, least_gpu_s = o.fastest
    total = float(np.where(starting, fastest[rows, choice.cap], o.wait[rows, choice.start] + runtime).sum())
    if crowd:
        total += _crowd_delay_s(np.where(starting, least_gpu_s[rows, choice.cap], o.gpus[choice.col] * runtime),
                                queue, crowd)
    return total


def _queued_intensity(o: Options, choice: Choice, ends: np.ndarray, forecast: CarbonForecast) -> np.ndarray:
    """Budget units per kWh of each job over its run as the queue estimate expects it: the
    forecast's mean from its expected start to its expected end (``ends``, seconds from now).

    The greedy plans price a deferred job at its window's intensity, as if it started there;
    jobs deferred into the same trough, or queued behind others, run past it, and a budget
    held to the window's figure is not the carbon the plan will emit: a tight budget "held"
    by deferring whole queues into one trough, and its users waited for carbon that was
    never saved (at budget 0.6, over twice FIFO's JCT on 78 of 168 generated workloads
    before, 59 after; docs/policies.md, "Budgeted as queued"). A job the estimate never
    starts (a configuration not allowed: infinite runtime) keeps its planned start's figure.
    """
    runtime = o.runtime[o.rows, choice.col, choice.cap]
    known = np.isfinite(ends)  # a finite end has a finite runtime, and start = end - runtime >= 0
    end = np.where(known, ends, 0.0)
    start = end - np.where(known, runtime, 0.0)
    mean = np.asarray(forecast.mean_over(o.now + start, o.now + end), dtype=np.float64) / 1000.0
    return np.where(known, mean, o.intensity[o.rows, choice.start])


def _next_end(releases: list[tuple[float, int]], ri: int, nrel: int,
              started: list[tuple[float, int]]) -> tuple[tuple[float, int] | None, bool]:
    """The earliest (end, GPUs) not yet taken, and whether it is one of the planned starts
    (heap ``started``) rather than a running job's (``releases[ri:]``, sorted); (None, False)
    when none is left."""
    if ri < nrel:
        if started and started[0] < releases[ri]:
            return started[0], True
        return releases[ri], False
    if started:
        return started[0], True
    return None, False


def _start_oldest(queues: dict[int, list[int]], sizes: list[int], size: int, t: float, runtime: list[float],
                  started: list[tuple[float, int]], ends: list[float] | None) -> float:
    """Start the oldest queued job of ``size`` GPUs at ``t`` (its end onto ``started``, and into
    ``ends`` if given; ``size`` out of the ascending ``sizes`` if its queue emptied); returns its
    completion time."""
    queue = queues[size]
    j = heapq.heappop(queue)
    end = t + runtime[j]
    if ends is not None:
        ends[j] = end
    heapq.heappush(started, (end, size))
    if not queue:
        del queues[size]
        sizes.remove(size)
    return end


def expected_completion_s(o: Options, choice: Choice, free_gpus: int,
                           releases: list[tuple[float, int]], ends: list[float] | None = None) -> float:
    """The sum of the pending jobs' expected completion times after now (so, up to a
    constant, their JCT); each job's, by row, into ``ends`` if given (``GreenFlowPolicy._share``
    weighs a job's wait by it).

    Admitted jobs start now (they fit, by construction). The others are played as a
    backfilling Slurm plays them: from its earliest start (now, or its deferred window) a
    job is eligible, and whenever GPUs free (running and planned jobs end by their
    expected runtimes) the eligible jobs that fit start, oldest first. So a deferred job
    that comes back takes the next free GPUs ahead of the jobs queued meanwhile, as it
    would on the cluster. Every job that fits starts (no reservation holds GPUs back):
    with time limits over-estimating runtimes, a stricter FIFO estimate over-states
    queueing, and then deferring a large job out of the queue looks free when it is not.
    A configuration the user does not allow has an infinite runtime, so a plan using
    one scores infinity.
    """
    rows = o.rows
    gpus = o.gpus[choice.col].tolist()
    runtime = o.runtime[rows, choice.col, choice.cap].tolist()
    earliest = o.wait[rows, choice.start].tolist()
    now_admitted = (choice.admitted & (choice.start == 0)).tolist()
    # The ends to come: ``releases`` (sorted, read in order) merged with a heap of the ends of
    # the jobs started here; the smaller of the two heads is next, the same (end, GPUs) pairs in
    # the same order as one heap of both would pop.
    ri, nrel = 0, len(releases)
    started: list[tuple[float, int]] = []
    left, total, later = free_gpus, 0.0, []
    for j, admitted in enumerate(now_admitted):
        if admitted:
            left -= gpus[j]
            total += runtime[j]
            heapq.heappush(started, (runtime[j], gpus[j]))
            if ends is not None:
                ends[j] = runtime[j]
        else:
            later.append((earliest[j], j))
    later.sort()
    # Eligible rows per GPU count, each a heap (the oldest job on top). Starting every job that
    # fits, oldest first, in one pass over the eligible jobs by age is the same as starting,
    # again and again, the oldest of the size queues' heads that fit (a job passed over did not
    # fit with more GPUs left, so it cannot fit later in the pass): the same jobs start in the
    # same order, and a start costs one look per distinct size that fits (smallest first) instead
    # of a pass over the queue.
    queues: dict[int, list[int]] = {}
    sizes: list[int] = []  # the sizes with an eligible job, ascending (the first: the least that can start)
    t, k, count = 0.0, 0, len(later)
    while k < count or queues:
        while k < count and later[k][0] <= t:
            j = later[k][1]
            queue = queues.get(gpus[j])
            if queue is None:
                queues[gpus[j]] = [j]
                bisect.insort(sizes, gpus[j])
            else:
                heapq.heappush(queue, j)
            k += 1
        while sizes and left >= sizes[0]:
            oldest, size = -1, 0
            for g in sizes:
                if g > left:
                    break
                head = queues[g][0]
                if oldest < 0 or head < oldest:
                    oldest, size = head, g
            total += _start_oldest(queues, sizes, size, t, runtime, started, ends)
            left -= size
        arrive = later[k][0] if k < count else math.inf
        nxt, from_started = _next_end(releases, ri, nrel, started)
        if nxt is not None and nxt[0] <= arrive and (queues or k < count):
            # This end, and the ends after it that free too few GPUs for any eligible size before
            # the next arrival (they change nothing but the time and the GPUs left): what as many
            # turns of the outer loop would do, one end each.
            while True:
                if from_started:
                    heapq.heappop(started)
                else:
                    ri += 1
                t, left = max(t, nxt[0]), left + nxt[1]
                if sizes and left >= sizes[0]:
                    break
                nxt, from_started = _next_end(releases, ri, nrel, started)
                if nxt is None or not nxt[0] < arrive:
                    break
        elif arrive < math.inf:
            t = arrive
        elif queues:  # larger than the whole cluster: it starts once everything ahead has ended
            size = min(queues, key=lambda g: queues[g][0])
            total += _start_oldest(queues, sizes, size, t, runtime, started, ends)
            left -= size
    return total
