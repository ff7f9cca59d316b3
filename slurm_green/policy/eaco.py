"""EaCO: co-locate deep-learning jobs on shared GPUs when the predicted slowdown is small.

EaCO (energy-aware co-location) runs a job on GPUs another job already holds when the
co-location model predicts that neither is slowed beyond a site bound. The GPUs the
second job did not take stay free (for the queue, or idle at idle power instead of
busy), and a pair draws less than two GPUs running the same work one after the other:
that is the energy saved. Everything else is FIFO: every managed job is released now,
as requested, at full power.

A pending job may share only if its trusted marker says ``share=1`` (``green:share=yes``)
and its partner's does too. Partners are running jobs on whole GPUs (hosts) with a free
share slot, or pending jobs this same decision releases onto free GPUs (they start at
this tick's scheduling pass, and the guest starts beside them). A guest takes its
host's layout (GPUs per node, nodes), which must lie in the guest's allowed GPU range;
each of its GPUs then holds host and guest. ``share_limit`` jobs at most per GPU
(Slurm: shards per GPU in gres.conf).

What the snapshot says about sharing: a running guest is a job with ``shards_per_node``
> 0 on its host's nodes (the simulator and Slurm's ``gres/shard`` report it so); it is
counted against the host on the same nodes with that many GPUs per node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurm_green.core.cluster import ClusterSnapshot, Job, JobState
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.policy.pending import _parse_marker, pending_jobs


@dataclass
class _Host:
    """A job whose GPUs a guest may share, and how many more jobs its GPUs can take."""

    job_id: int
    job_type: str
    gpu: str | None
    gpus_per_node: int
    num_nodes: int
    slots: int
    running: bool
    guests: list[int] = field(default_factory=list)

    @property
    def group(self) -> tuple[str, str | None, int, int]:
        """What a pair's slowdown and a guest's fit depend on: type, GPU type, layout."""
        return (self.job_type, self.gpu, self.gpus_per_node, self.num_nodes)


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

    def __call__(self, snapshot: ClusterSnapshot, forecast: object | None, models: object, now: float) -> Plan:
        jobs = pending_jobs(snapshot, self.default_runtime_s)
        groups = _groups(_running_hosts(snapshot, self.share_limit))
        free = snapshot.gpus_free
        cache: dict[tuple[str, str, str | None], tuple[float, float]] = {}
        decisions = []
        for job, options, runtime in zip(jobs.jobs, jobs.options, jobs.runtime_s.tolist()):
            gpus = max(1, job.total_gpus)
            if options.accept_share:
                low = options.gpus_min if options.gpus_min is not None else gpus
                high = options.gpus_max if options.gpus_max is not None else gpus
                host, slow = self._partner(job, low, high, groups, models, cache)
                if host is not None:
                    host.slots -= 1
                    host.guests.append(job.job_id)
                    decisions.append(self._shared(job, host, slow, runtime, now))
                    continue
                if gpus <= free and self.share_limit > 1:
                    host = _Host(job.job_id, job.name, job.gpu_type, job.gpus_per_node, job.num_nodes,
                                 self.share_limit - 1, running=False)
                    groups.setdefault(host.group, []).append(host)
            free -= min(free, gpus)
            decisions.append(JobDecision(job.job_id, start_at=now, expected_runtime_s=runtime,
                                         reason="EaCO: no partner within the slowdown bound; start now, as asked"))
        return Plan(decisions=tuple(decisions))

    def _partner(self, job: Job, low: int, high: int, groups: dict[tuple, list[_Host]], models: object,
                 cache: dict[tuple[str, str, str | None], tuple[float, float]]) -> tuple[_Host | None, tuple[float, float]]:
        """The host whose pair with ``job`` has the smallest worse slowdown within the bound
        (among equals the oldest host); hosts are grouped by what the slowdown depends on."""
        best: _Host | None = None
        best_slow = (float("inf"), float("inf"))
        for (job_type, gpu, per_node, nodes), members in groups.items():
            if not low <= per_node * nodes <= high:
                continue
            key = (job.name, job_type, gpu)
            slow = cache.get(key)
            if slow is None:
                slow = cache[key] = models.colocated_slowdown(  # type: ignore[attr-defined]
                    job.name or None, job_type or None, gpu)
            worse = max(slow)
            if worse > self.slowdown_bound or worse >= max(best_slow):
                continue
            host = next((h for h in members if h.slots > 0), None)
            if host is not None:
                best, best_slow = host, slow
        return best, best_slow

    def _shared(self, job: Job, host: _Host, slow: tuple[float, float], runtime: float, now: float) -> JobDecision:
        where = "running" if host.running else "starting now"
        return JobDecision(
            job.job_id, start_at=now, gpus_per_node=host.gpus_per_node, num_nodes=host.num_nodes,
            share_with=host.job_id, expected_runtime_s=runtime * slow[0],
            reason=(f"EaCO: share the GPUs of job {host.job_id} ({where}); predicted slowdown "
                    f"{slow[0]:.2f}x for this job, {slow[1]:.2f}x for it (bound {self.slowdown_bound:g}x)"))


def _groups(hosts: list[_Host]) -> dict[tuple, list[_Host]]:
    groups: dict[tuple, list[_Host]] = {}
    for host in hosts:
        groups.setdefault(host.group, []).append(host)
    return groups


def _running_hosts(snapshot: ClusterSnapshot, share_limit: int) -> list[_Host]:
    """Running jobs on whole GPUs that accept sharing, less the guests already on their GPUs."""
    hosts: list[_Host] = []
    guests: list[Job] = []
    for job in snapshot.jobs:
        if job.state is not JobState.RUNNING:
            continue
        if job.shards_per_node > 0:
            guests.append(job)
            continue
        options = _parse_marker(job.admin_comment)
        if options is not None and options.accept_share and job.gpus_per_node > 0 and share_limit > 1:
            hosts.append(_Host(job.job_id, job.name, job.gpu_type, job.gpus_per_node, job.num_nodes,
                               share_limit - 1, running=True, guests=[]))
    by_place: dict[tuple[tuple[str, ...], int], list[_Host]] = {}
    nodes_of = {job.job_id: job.nodes for job in snapshot.jobs}
    for host in hosts:
        by_place.setdefault((nodes_of[host.job_id], host.gpus_per_node), []).append(host)
    for guest in guests:
        for host in by_place.get((guest.nodes, guest.shards_per_node), ()):
            if host.slots > 0:
                host.slots -= 1
                host.guests.append(guest.job_id)
                break
    return hosts
