"""EaCO: co-locate deep-learning jobs on shared GPUs when the predicted slowdown is small.

EaCO (energy-aware co-location) runs a job on a GPU another job already holds when the
co-location model predicts that neither is slowed beyond a site bound. The GPU the
second job did not take stays free (for the queue, or idle at idle power instead of
busy), and a pair draws less than two GPUs running the same work one after the other:
that is the energy saved. Everything else is FIFO: every managed job is released now,
as requested, at full power.

A pending job may share only if its trusted marker says ``share=1`` (``green:share=yes``)
and its partner's does too. Pairs are of jobs of at most ``max_gpus`` GPUs (default 1:
what Slurm's shards of one GPU give, and what the planner enacts on Slurm; the simulator
also takes larger pairs) with the same layout (GPUs per node, nodes): the guest runs on
each of the host's GPUs. Partners are running jobs (hosts) with a free share slot, or
one-node jobs this same decision releases onto free GPUs: such a host is pinned to the
fullest node with room, and its guest with it. At most ``share_limit`` jobs per GPU
(Slurm: shards per GPU in gres.conf; the planner and the simulator enact pairs, i.e. 2).

What the snapshot says about sharing: a running guest is a job with ``shards_per_node``
> 0 and no whole GPU, on its host's node (the simulator and Slurm's ``gres/shard`` report
it so). It is counted against the host its decision token names (``share``, written by
the controller into the job's Comment; read without the key, which a policy does not
hold: a forged token can only make a host look full, never over-commit a GPU), else
against a sharing host on the same node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from slurm_green.core import decision_token
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.policy.pending import _parse_marker, pending_jobs


Layout = tuple[int, int]  # GPUs per node, nodes


@dataclass
class _Host:
    """A job whose GPUs a guest may share, and how many more jobs those GPUs can take."""

    job_id: int
    job_type: str
    gpu: str | None
    layout: Layout
    slots: int
    running: bool
    nodes: tuple[str, ...]

    @property
    def group(self) -> tuple[str, str | None, Layout]:
        """What a pair's slowdown and a guest's fit depend on."""
        return (self.job_type, self.gpu, self.layout)


def _layout(job: Job) -> Layout:
    """GPUs per node (whole, or shards of its GPUs once bound to a partner) and nodes."""
    return (job.gpus_per_node or job.shards_per_node, job.num_nodes)


@dataclass(frozen=True)
class EaCoPolicy:
    """See the module docstring. ``slowdown_bound``: the largest predicted time stretch of
    either job of a pair (EaCO's site bound); ``share_limit``: jobs per GPU at most."""

    name: str = "eaco"
    slowdown_bound: float = 1.25
    share_limit: int = 2
    default_runtime_s: float = 3600.0
    #: The sharing mechanism the site enables: ``timeslice`` (gres/shard) or ``mps`` (gres/mps).
    mechanism: str = "timeslice"
    #: Jobs of at most this many GPUs share (1: what Slurm's shards enact).
    max_gpus: int = 1

    def __call__(self, snapshot: ClusterSnapshot, forecast: object | None, models: object, now: float) -> Plan:
        jobs = pending_jobs(snapshot, self.default_runtime_s)
        hosts: dict[tuple[str, str | None, Layout], list[_Host]] = {}
        sharing = any(options.accept_share for options in jobs.options)  # else: FIFO, nothing to look up
        for host in _running_hosts(snapshot, self.share_limit, self.max_gpus) if sharing else ():
            hosts.setdefault(host.group, []).append(host)
        free = _free_gpus(snapshot)
        cache: dict[tuple[str, str, str | None], tuple[float, float]] = {}
        decisions: dict[int, JobDecision] = {}
        for job, options, runtime in zip(jobs.jobs, jobs.options, jobs.runtime_s.tolist()):
            layout = _layout(job)
            gpus = max(1, layout[0] * layout[1])
            shares = options.accept_share and gpus <= self.max_gpus
            host, slow = self._partner(job, layout, hosts, models, cache) if shares else (None, (1.0, 1.0))
            if host is not None:
                host.slots -= 1
                decisions[job.job_id] = self._shared(job, host, slow, runtime, now)
                if not host.running:  # the host is pinned beside its guest
                    decisions[host.job_id] = replace(decisions[host.job_id], nodes=host.nodes)
                continue
            node = _take(free, gpus)
            if shares and node is not None and layout[1] == 1 and self.share_limit > 1:
                host = _Host(job.job_id, job.name, job.gpu_type, layout, self.share_limit - 1, False, (node,))
                hosts.setdefault(host.group, []).append(host)
            decisions[job.job_id] = JobDecision(
                job.job_id, start_at=now, expected_runtime_s=runtime,
                reason="EaCO: no partner within the slowdown bound; start now, as asked")
        return Plan(decisions=tuple(decisions.values()))

    def _partner(self, job: Job, layout: Layout, hosts: dict[tuple[str, str | None, Layout], list[_Host]],
                 models: object, cache: dict[tuple[str, str, str | None], tuple[float, float]]
                 ) -> tuple[_Host | None, tuple[float, float]]:
        """The host whose pair with ``job`` has the smallest worse slowdown within the bound
        (hosts are grouped by what the slowdown depends on; in a group the first with a slot:
        running hosts, oldest first, then this tick's)."""
        best: _Host | None = None
        best_slow = (math.inf, math.inf)
        for (job_type, gpu, host_layout), members in hosts.items():
            if host_layout != layout:
                continue
            key = (job.name, job_type, gpu)
            slow = cache.get(key)
            if slow is None:
                slow = cache[key] = models.colocated_slowdown(  # type: ignore[attr-defined]
                    job.name or None, job_type or None, gpu, self.mechanism)
            if max(slow) > self.slowdown_bound or max(slow) >= max(best_slow):
                continue
            host = next((h for h in members if h.slots > 0), None)
            if host is not None:
                best, best_slow = host, slow
        return best, best_slow

    def _shared(self, job: Job, host: _Host, slow: tuple[float, float], runtime: float, now: float) -> JobDecision:
        where = "running" if host.running else "starting now"
        return JobDecision(
            job.job_id, start_at=now, nodes=host.nodes, share_with=host.job_id, expected_runtime_s=runtime * slow[0],
            reason=(f"EaCO: share the GPU of job {host.job_id} ({where}, {self.mechanism}); predicted slowdown "
                    f"{slow[0]:.2f}x for this job, {slow[1]:.2f}x for it (bound {self.slowdown_bound:g}x)"))


def _take(free: dict[str, int], gpus: int) -> str | None:
    """Take ``gpus`` free GPUs on the fullest node that has them (best fit): the node a host is
    pinned to (None for a job larger than any node's free GPUs)."""
    fitting = [(count, name) for name, count in free.items() if count >= gpus]
    if not fitting:
        return None
    name = min(fitting)[1]
    free[name] -= gpus
    return name


#: The last snapshot's node tuple and its free GPUs per node (the simulator keeps the same tuple
#: while no node changes), and each running job's role by job id, for the very same Job object
#: (held here, so the identity check is sound): a tick re-reads only what changed.
_FREE: list[object] = [None, {}]
_ROLES: dict[int, tuple[Job, int, str | None]] = {}


def _free_gpus(snapshot: ClusterSnapshot) -> dict[str, int]:
    if _FREE[0] is not snapshot.nodes:
        _FREE[:] = [snapshot.nodes, {node.name: node.gpus_free for node in snapshot.nodes if node.gpus_free > 0}]
    return dict(_FREE[1])  # type: ignore[call-overload]


def _role(job: Job, max_gpus: int) -> str | None:
    """``guest`` (running on shards of another job's GPUs), ``host`` (a running job of at most
    ``max_gpus`` GPUs that accepts sharing) or None."""
    if job.shards_per_node > 0 and job.gpus_per_node == 0:
        return "guest"
    if not 0 < job.total_gpus <= max_gpus:
        return None
    options = _parse_marker(job.admin_comment)
    return "host" if options is not None and options.accept_share else None


def _running_hosts(snapshot: ClusterSnapshot, share_limit: int, max_gpus: int) -> list[_Host]:
    """Running jobs of at most ``max_gpus`` GPUs that accept sharing, less the guests already on their GPUs."""
    global _ROLES
    last, kept = _ROLES, {}
    hosts: list[_Host] = []
    guests: list[Job] = []
    running = JobState.RUNNING
    for job in snapshot.jobs:
        if job.state is not running:
            continue
        hit = last.get(job.job_id)
        role = hit[2] if hit is not None and hit[0] is job and hit[1] == max_gpus else _role(job, max_gpus)
        kept[job.job_id] = (job, max_gpus, role)
        if role == "guest":
            guests.append(job)
        elif role == "host" and share_limit > 1:
            hosts.append(_Host(job.job_id, job.name, job.gpu_type, _layout(job), share_limit - 1, True, job.nodes))
    _ROLES = kept
    by_id = {host.job_id: host for host in hosts}
    by_node: dict[tuple[str, ...], list[_Host]] = {}
    for host in hosts:
        by_node.setdefault(host.nodes, []).append(host)
    for guest in guests:
        host = by_id.get(_named_partner(guest))  # type: ignore[arg-type]
        if host is None or host.nodes != guest.nodes:
            host = next((h for h in by_node.get(guest.nodes, ()) if h.slots > 0 and h.layout == _layout(guest)), None)
        if host is not None:
            host.slots -= 1
    return hosts


def _named_partner(job: Job) -> int | None:
    """The partner the job's decision token names, if any."""
    token = decision_token.find_token(job.comment)
    try:
        partner = decision_token.unverified_payload(token).get("share") if token else None
    except decision_token.InvalidToken:
        return None
    return partner if isinstance(partner, int) and not isinstance(partner, bool) else None
