"""Co-location as one more candidate in GreenFlow's and PowerFlow's cost (issue 13).

EaCO shares a GPU whenever both predicted slowdowns stay within a bound. Inside GreenFlow
the same move is priced like every other choice, ``cost = time + price x carbon`` plus the
GPU-seconds it makes later jobs wait (``greenflow.queue_estimate._expected_cost_s``): a job
the plan does **not** start now (queued behind busy GPUs, or deferred to a cleaner window)
may instead start at once on the GPU of a one-GPU job that runs or starts now, if that costs
less than its plan. So a budget buys co-location where it is cheaper than GPU-hours or waiting, and
never where the pair's slowdown costs more time than the wait it saves.

For a guest g beside host h under the pair's cap (``eaco.pair_cap``; a running host's is
settled by its token), with solo run times S at that cap and co-location stretches s, and the
pair's power under that cap (``eaco.pair_at_caps``, as EaCO and the simulator take it):
both run together for T = min(S_g s_g, S_h s_h), then the one left runs alone. The guest's
time is its completion; the host's is the delay over its own plan (a cap the pair changes
included); the energy is the pair's power over T plus the one left alone, less what the
host alone would have drawn; the GPU-seconds are how much longer the host's GPU is held.
The plan's cost of g is its completion in GreenFlow's own queue estimate (its wait
included), its priced carbon and its GPU-seconds. The guest shares when the first is
lower; guests are taken oldest first, each with its cheapest host on a node its partition
holds, one guest per GPU (Slurm's shards enact pairs).

No pair slows either job past its partition's ``MaxTime`` (the planner's rule).

What is not counted: the queue a guest leaves (the jobs behind it start sooner; so this
errs towards not sharing), and a running host's true remaining time (its time limit is all
Slurm knows, as in GreenFlow's own estimate).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from slurm_green.core.cluster import ClusterSnapshot, Job
from slurm_green.core.models import Config, ModelRegistry
from slurm_green.core.plan import JobDecision
from slurm_green.core.time_limit import partition_limits, partition_max_times, slowed_past_max_time
from slurm_green.policy.eaco import cap_rate, pair_at_caps, pair_cap, running_hosts

_J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class Colocation:
    """The site's sharing settings (EaCO's): the largest stretch either job of a pair may
    suffer, and the mechanism (``timeslice``: gres/shard; ``mps``: gres/mps)."""

    slowdown_bound: float = 1.25
    mechanism: str = "timeslice"


@dataclass(frozen=True)
class Planned:
    """One pending job as the plan decided it, in the units of the plan's cost."""

    job: Job
    accept_share: bool
    accept_cap: bool
    starts_now: bool
    one_gpu: bool  #: asked for, and planned on, one GPU of one node
    runtime_s: float  #: planned run time
    energy_kwh: float  #: planned energy
    cost_s: float  #: completion (wait included) + price x carbon + later jobs' wait for its GPU-seconds
    solo_s: float  #: run time alone on one GPU at full power
    intensity: float  #: budget units per kWh starting now
    nodes: tuple[str, ...] | None  #: where it starts now, if it does
    #: The nodes it may run on (its partition's, ``core.partitions``); None: any of the pool's.
    allowed: frozenset[str] | None = None


@dataclass
class _Host:
    """A one-GPU job whose GPU a guest may take: its solo run time left and energy at ``cap``,
    (None: to be the pair's), and what its own plan holds."""

    job: Job
    nodes: tuple[str, ...]
    accept_cap: bool
    running: bool
    cap: float | None  #: settled for a running host (its token's)
    left_s: float  #: run time left at full power (running: to its time limit; pending: its plan's at full power)
    planned_s: float  #: its completion as planned alone
    planned_kwh: float  #: its energy as planned alone
    taken: bool = False


@dataclass(frozen=True)
class _Pair:
    cost_s: float
    cap: float | None
    completion_s: float
    energy_kwh: float
    slow: tuple[float, float]
    host_completion_s: float  #: the host's expected end, from now, with its guest
    #: How many times longer the host runs beside its guest than alone at full power (its
    #: co-location slowdown over its rate at the pair's cap): a running host's time limit follows it.
    host_stretch: float


def share_where_cheaper(planned: list[Planned], decisions: list[JobDecision], snapshot: ClusterSnapshot,
                        models: ModelRegistry, gpu: str | None, now: float, price: float, crowd_per_gpu_s: float,
                        settings: Colocation, carbon: bool) -> list[JobDecision]:
    """``decisions`` (one per ``planned``, in its order) with each job that does not start
    now put on a host's GPU where that costs less than its plan (see the module docstring).
    ``crowd_per_gpu_s``: seconds of later jobs' wait per GPU-second held (GreenFlow's term);
    ``carbon``: the budget is carbon (else energy, and no decision names carbon)."""
    guests = [i for i, p in enumerate(planned) if p.accept_share and p.one_gpu and not p.starts_now]
    if not guests:
        return decisions
    hosts = _hosts(planned, snapshot, models, gpu, now)
    if not hosts:
        return decisions
    out = list(decisions)
    limits, max_times = partition_limits(snapshot), partition_max_times(snapshot)
    for i in guests:
        guest = planned[i]
        best: tuple[_Pair, _Host] | None = None
        for host in hosts:
            if host.taken or (not guest.accept_cap and host.cap is not None and host.running) or (
                    guest.allowed is not None and not guest.allowed.issuperset(host.nodes)):
                continue
            pair = _price_pair(guest, host, models, gpu, price, crowd_per_gpu_s, settings)
            if pair is None or _past_max_time(guest.job, host, pair, limits, max_times):
                continue
            if best is None or pair.cost_s < best[0].cost_s:
                best = (pair, host)
        if best is None or not best[0].cost_s < guest.cost_s:
            continue
        pair, host = best
        host.taken = True
        out[i] = _guest_decision(out[i], guest, host, pair, now, carbon)
        if not host.running:  # starting now with its guest: the pair's cap, and slower (its time limit follows)
            h = next(k for k, p in enumerate(planned) if p.job.job_id == host.job.job_id)
            out[h] = replace(out[h], power_cap_fraction=pair.cap if planned[h].accept_cap else None,
                             expected_runtime_s=pair.host_completion_s)
    return out


def _hosts(planned: list[Planned], snapshot: ClusterSnapshot, models: ModelRegistry, gpu: str | None,
           now: float) -> list[_Host]:
    """Running one-GPU jobs on shards with room (EaCO's rule), then the one-GPU jobs this plan
    starts now on a node with no shard in use (where Slurm's first fit gives both jobs one GPU).
    ``snapshot`` is the pool of ``gpu``: its running jobs run on that type, asked for or not."""
    out = []
    for host in running_hosts(snapshot, 2, 1):
        job = snapshot.job(host.job_id)
        if job is None:
            continue
        left = max(0.0, (job.end_time if job.end_time is not None else now) - now)
        # The time limit is run time at the cap in force: back to full power, as the others.
        rate = cap_rate(models, job.name, gpu, host.cap)
        out.append(_Host(job, host.nodes, host.accept_cap, True, host.cap, left * rate, left,
                         left * _power_w(models, job.name, gpu, host.cap) / _J_PER_KWH))
    no_shards = {node.name for node in snapshot.nodes if not node.shards_allocated}
    for p in planned:
        if p.accept_share and p.one_gpu and p.starts_now and p.nodes and set(p.nodes) <= no_shards:
            out.append(_Host(p.job, p.nodes, p.accept_cap, False, None, p.solo_s, p.runtime_s, p.energy_kwh))
    return out


def _past_max_time(guest: Job, host: _Host, pair: _Pair, limits: Mapping[str, float | None],
                   max_times: Mapping[str, float | None]) -> bool:
    """Whether the pair would slow either job past its partition's ``MaxTime``: Slurm would stop
    it there (``time_limit.slowed_past_max_time``, the planner's rule), so no such pair is priced."""
    return (slowed_past_max_time(guest, pair.completion_s, limits, max_times)
            or slowed_past_max_time(host.job, pair.host_completion_s, limits, max_times,
                                    pair.host_stretch if host.running else None))


def _power_w(models: ModelRegistry, job_type: str, gpu: str | None, cap: float | None) -> float:
    return models.for_job(job_type or None, gpu).power_w(Config(1, 1, cap or 1.0))


def _price_pair(guest: Planned, host: _Host, models: ModelRegistry, gpu: str | None, price: float,
                crowd_per_gpu_s: float, settings: Colocation) -> _Pair | None:
    """The cost of ``guest`` starting now on ``host``'s GPU (None: a stretch beyond the bound)."""
    g_type, h_type = guest.job.name, host.job.name
    if max(models.colocated_slowdown(g_type or None, h_type or None, gpu, settings.mechanism)) > settings.slowdown_bound:
        return None  # beyond the bound at any cap: no pair cap to look for
    if host.running:
        cap = host.cap
    elif guest.accept_cap and host.accept_cap:
        cap = pair_cap(models, g_type, h_type, gpu, settings.mechanism, settings.slowdown_bound)
    else:
        cap = None
    at_cap = pair_at_caps(models, g_type, h_type, gpu, settings.mechanism, [cap])  # as EaCO and the simulator
    p_g, p_h, pair_w = float(at_cap.power_a_w[0]), float(at_cap.power_b_w[0]), float(at_cap.pair_w[0])
    slow_g, slow_h = float(at_cap.slow_a[0]), float(at_cap.slow_b[0])
    # The bound is on each job's stretch under the pair's cap, as EaCO holds it: a running host's
    # token settles a cap that can stretch a guest well past its slowdown alone (LM beside a
    # ResNet-18 capped at 0.4: 1.20 x slowed, 1.47 x stretched).
    if not max(float(at_cap.stretch_a[0]), float(at_cap.stretch_b[0])) <= settings.slowdown_bound:
        return None
    solo_g = guest.solo_s / float(at_cap.rate_a[0])
    rate_h = float(at_cap.rate_b[0])
    solo_h = host.left_s / rate_h
    together = min(solo_g * slow_g, solo_h * slow_h)
    if solo_g * slow_g <= solo_h * slow_h:  # the guest ends first; the host finishes alone
        guest_done = together
        host_done = together + solo_h - together / slow_h
        alone_j = p_h * (solo_h - together / slow_h)
    else:
        host_done = together
        guest_done = together + solo_g - together / slow_g
        alone_j = p_g * (solo_g - together / slow_g)
    energy = (pair_w * together + alone_j) / _J_PER_KWH - host.planned_kwh
    held_s = max(guest_done, host_done) - host.planned_s  # how much longer the host's GPU is held
    cost = (guest_done + (host_done - host.planned_s) + price * energy * guest.intensity
            + crowd_per_gpu_s * held_s)
    return _Pair(cost, cap, guest_done, energy, (slow_g, slow_h), host_done, slow_h / rate_h)


def _guest_decision(decision: JobDecision, guest: Planned, host: _Host, pair: _Pair, now: float,
                    carbon: bool) -> JobDecision:
    where = "running" if host.running else "starting now"
    cap = pair.cap if guest.accept_cap else None
    capped = f", both at cap {pair.cap:g}" if pair.cap is not None else ""
    return replace(
        decision, start_at=now, gpus_per_node=1, num_nodes=1, nodes=host.nodes, share_with=host.job.job_id,
        power_cap_fraction=cap, expected_runtime_s=pair.completion_s, expected_energy_kwh=pair.energy_kwh,
        partner_stretch=pair.host_stretch if host.running else None,
        expected_carbon_kg=pair.energy_kwh * guest.intensity if carbon else None,
        reason=(f"share the GPU of job {host.job.job_id} ({where}): cost {pair.cost_s / 3600:.2f} h against "
                f"{guest.cost_s / 3600:.2f} h as planned; predicted slowdown {pair.slow[0]:.2f}x, "
                f"{pair.slow[1]:.2f}x for it{capped}"))

