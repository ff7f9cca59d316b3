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
also takes larger pairs released together) with the same layout (GPUs per node, nodes):
the guest runs on each of the host's GPUs. A job on shards counts as one GPU per node
(Slurm gives a job's shards of a node from one GPU). At most ``share_limit`` jobs per GPU
(Slurm: shards per GPU in gres.conf; the planner and the simulator enact pairs, i.e. 2).

Partners (hosts) are only those a backend can join, read from the snapshot, not from
which backend it is, on nodes the guest's partition allows (``core.partitions``, the
planner's rule, so the planner never drops a pair's pin):

- one-node jobs this same decision releases onto a free GPU: such a host is pinned to the
  fullest node of its partition with a free GPU and no shard in use (where Slurm's first
  fit gives both jobs one GPU), and its guest with it;
- running jobs **on shards** (``shards_per_node`` > 0, no whole GPU) whose GPU has room: a
  pair member whose partner ended, or a job submitted with ``--gres=shard:K``. A job running
  on whole GPUs hosts nobody: Slurm gives no shards of a GPU allocated whole, so such a
  pair would run apart (the simulator reports its jobs the same way). The running jobs of
  a pair name each other in their decision tokens (``share``, written by the controller
  into the Comment; read without the key, which a policy does not hold: a forged token can
  only make a host look full, never over-commit a GPU). A shard job beside another shard
  job of its node that is not its partner hosts nobody: which GPU each holds is not in the
  snapshot.

Both jobs of a pair get one power cap (``pair_cap``): Zeus's energy-optimal cap for the
pair, the cap of ``allowed_caps`` with the least pair energy per unit of both jobs' work,
keeping each job's predicted stretch (co-location and cap) within the bound; full power
when either refuses caps. A guest of a running host takes the cap the host's token carries
(it cannot change while the host runs); with room for more than two jobs, every later guest
of a host starting now takes its first pair's cap (one GPU runs under one cap), and a job
refusing caps joins only a GPU with none.

No pair slows either job past its partition's ``MaxTime`` (``time_limit.slowed_past_max_time``,
the planner's rule, so the planner never has to undo a pair): Slurm would stop it there. A
job whose best partner fails that starts alone, as asked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from slurm_green.core import decision_token
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState, Node
from slurm_green.core.decision import DecisionContext, DecisionMemo
from slurm_green.core.green_options import parse_marker
from slurm_green.core.models import Config, ModelRegistry
from slurm_green.core.partitions import node_rules
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.core.time_limit import partition_limits, partition_max_times, slowed_past_max_time
from slurm_green.policy.pending import pending_jobs


Layout = tuple[int, int]  # GPUs per node, nodes
Pair = tuple[float, float]  # each job's predicted slowdown


@dataclass
class Host:
    """A job whose GPUs a guest may share, how many more jobs those GPUs can take and the
    cap the GPUs run under once shared (None: full power)."""

    job_id: int
    job_type: str
    gpu: str | None
    layout: Layout
    slots: int
    running: bool
    nodes: tuple[str, ...]
    accept_cap: bool
    cap: float | None = None
    #: Whether ``cap`` is settled: a running host's is its token's; a host starting now takes
    #: its first pair's, and every later guest shares that GPU, so that cap.
    cap_settled: bool = False
    #: A host starting now: its expected run time alone at full power, and the largest stretch
    #: its guests put on it (co-location slowdown over the cap's rate), which its decision's
    #: expected run time carries, so that its time limit is raised with it as a guest's is.
    runtime_s: float = 0.0
    stretch: float = 1.0

    @property
    def group(self) -> tuple[str, str | None, Layout]:
        """What a pair's slowdown and a guest's fit depend on."""
        return (self.job_type, self.gpu, self.layout)


def _layout(job: Job) -> Layout:
    """GPUs per node and nodes; a job on shards holds one GPU per node."""
    return (job.gpus_per_node or (1 if job.shards_per_node else 0), job.num_nodes)


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

    def __call__(self, context: DecisionContext) -> Plan:
        snapshot, models, now = context.snapshot, context.models, context.now
        jobs = pending_jobs(snapshot, self.default_runtime_s, context.memo)
        hosts: dict[tuple[str, str | None, Layout], list[Host]] = {}
        sharing = any(options.accept_share for options in jobs.options)  # else: FIFO, nothing to look up
        for running in running_hosts(snapshot, self.share_limit, self.max_gpus) if sharing else ():
            hosts.setdefault(running.group, []).append(running)
        free = _free_gpus(snapshot, context.memo)
        pinnable = {node.name for node in snapshot.nodes if not node.shards_allocated}
        rules = node_rules(snapshot, context.memo)
        cache: dict[tuple[str, str, str | None], Pair] = {}
        decisions: dict[int, JobDecision] = {}
        limits, max_times = partition_limits(snapshot), partition_max_times(snapshot)
        for job, options, runtime in zip(jobs.jobs, jobs.options, jobs.runtime_s.tolist()):
            layout = _layout(job)
            gpus = max(1, layout[0] * layout[1])
            shares = options.accept_share and gpus <= self.max_gpus
            allowed = rules.allowed(job)  # its partition's nodes (``core.partitions``), None: any
            host, slow = (self._partner(job, layout, hosts, models, cache, options.accept_cap, allowed) if shares
                          else (None, (1.0, 1.0)))
            alone = "no partner within the slowdown bound"
            if host is not None:
                cap = host.cap  # one GPU, one cap: a guest refusing caps only joins an uncapped one
                if not host.cap_settled and host.accept_cap and options.accept_cap:
                    cap = pair_cap(models, job.name, host.job_type, host.gpu, self.mechanism, self.slowdown_bound)
                at_cap = pair_at_caps(models, job.name, host.job_type, host.gpu, self.mechanism, [cap])
                slow = (float(at_cap.slow_a[0]), float(at_cap.slow_b[0]))
                stretch = (float(at_cap.stretch_a[0]), float(at_cap.stretch_b[0]))
                host_job = snapshot.job(host.job_id)
                if slowed_past_max_time(job, runtime * stretch[0], limits, max_times) or (
                        host_job is not None and slowed_past_max_time(
                            host_job, host.runtime_s * max(host.stretch, stretch[1]), limits, max_times,
                            stretch[1] if host.running else None)):
                    alone = f"sharing job {host.job_id}'s GPU would slow one of them past its partition's MaxTime"
                    host = None
            if host is not None:
                host.slots -= 1
                host.cap, host.cap_settled = cap, True
                decisions[job.job_id] = self._shared(job, host, slow, cap, stretch, runtime, now)
                if not host.running:  # the host is pinned beside its guest, under the pair's cap, and slowed
                    host.stretch = max(host.stretch, stretch[1])
                    decisions[host.job_id] = replace(decisions[host.job_id], nodes=host.nodes,
                                                     power_cap_fraction=cap,
                                                     expected_runtime_s=host.runtime_s * host.stretch)
                continue
            node = _take(free, gpus, pinnable if shares else None, allowed)
            if shares and node is not None and layout[1] == 1 and self.share_limit > 1:
                host = Host(job.job_id, job.name, job.gpu_type, layout, self.share_limit - 1, False, (node,),
                            options.accept_cap, runtime_s=runtime)
                hosts.setdefault(host.group, []).append(host)
            decisions[job.job_id] = JobDecision(job.job_id, start_at=now, expected_runtime_s=runtime,
                                                reason=f"EaCO: {alone}; start now, as asked")
        return Plan(decisions=tuple(decisions.values()))

    def _partner(self, job: Job, layout: Layout, hosts: dict[tuple[str, str | None, Layout], list[Host]],
                 models: ModelRegistry, cache: dict[tuple[str, str, str | None], Pair],
                 accept_cap: bool, allowed: frozenset[str] | None) -> tuple[Host | None, Pair]:
        """The host whose pair with ``job`` has the smallest worse slowdown within the bound
        (hosts are grouped by what the slowdown depends on; in a group the first with a slot,
        on nodes ``job`` may run on (``allowed``, None: any) and, for a job refusing caps, no
        cap: running hosts, oldest first, then this tick's)."""
        best: Host | None = None
        best_slow = (math.inf, math.inf)
        for (job_type, gpu, host_layout), members in hosts.items():
            if host_layout != layout:
                continue
            key = (job.name, job_type, gpu)
            slow = cache.get(key)
            if slow is None:
                slow = cache[key] = models.colocated_slowdown(job.name or None, job_type or None, gpu, self.mechanism)
            if max(slow) > self.slowdown_bound or max(slow) >= max(best_slow):
                continue
            host = next((h for h in members if h.slots > 0 and (accept_cap or h.cap is None)
                         and (allowed is None or allowed.issuperset(h.nodes))
                         and self._within_bound_at_its_cap(job, h, models)), None)
            if host is not None:
                best, best_slow = host, slow
        return best, best_slow

    def _within_bound_at_its_cap(self, job: Job, host: Host, models: ModelRegistry) -> bool:
        """Whether both jobs' stretch stays within the bound under the cap ``host``'s GPU is settled
        at (a running host's token cap, or its first pair's): the guest cannot change it. A host
        not settled yet gets the pair's own cap, which ``pair_cap`` keeps within the bound.

        Checked at full power only, a guest beside a host capped at 0.4 was predicted to run 1.47 x
        as long (LM beside ResNet-18 on the V100, bound 1.25), and ran up to 3.5 x in simulation."""
        if not host.cap_settled or host.cap is None:
            return True
        at_cap = pair_at_caps(models, job.name, host.job_type, host.gpu, self.mechanism, [host.cap])
        return max(float(at_cap.stretch_a[0]), float(at_cap.stretch_b[0])) <= self.slowdown_bound

    def _shared(self, job: Job, host: Host, slow: Pair, cap: float | None, stretch: Pair, runtime: float,
                now: float) -> JobDecision:
        """The guest's decision; ``stretch``: how many times longer the guest and the host run
        (co-location slowdown over the rate at ``cap``)."""
        where = "running" if host.running else "starting now"
        capped = f"; both at cap {cap:g}" if cap is not None else ""
        # A running host is slowed from now on under the cap in force: its time limit follows
        # (the planner's); a host starting now carries its own expected run instead (``__call__``).
        return JobDecision(
            job.job_id, start_at=now, nodes=host.nodes, share_with=host.job_id, power_cap_fraction=cap,
            expected_runtime_s=runtime * stretch[0], partner_stretch=stretch[1] if host.running else None,
            reason=(f"EaCO: share the GPU of job {host.job_id} ({where}, {self.mechanism}); predicted slowdown "
                    f"{slow[0]:.2f}x for this job, {slow[1]:.2f}x for it (bound {self.slowdown_bound:g}x){capped}"))


@dataclass(frozen=True)
class PairAtCaps:
    """Two jobs sharing one GPU, one entry per cap the GPU may run under: what EaCO's cap
    choice, GreenFlow's priced sharing and their decisions' run times all read, so that they
    price a pair as the simulator runs it (``ModelRegistry.colocation`` under the GPU's cap).

    ``rate_x``: a job's throughput alone at the cap over alone at full power; ``power_x_w``
    its power alone at the cap; ``slow_x`` its co-location slowdown (from its power at the
    cap where the load model serves); ``pair_w`` the shared GPU's power, at most what the
    board draws under the cap."""

    caps: np.ndarray
    rate_a: np.ndarray
    rate_b: np.ndarray
    power_a_w: np.ndarray
    power_b_w: np.ndarray
    slow_a: np.ndarray
    slow_b: np.ndarray
    pair_w: np.ndarray

    @property
    def stretch_a(self) -> np.ndarray:
        """How many times longer job a runs than alone at full power: sharing, then the cap."""
        return self.slow_a / self.rate_a

    @property
    def stretch_b(self) -> np.ndarray:
        return self.slow_b / self.rate_b


def pair_at_caps(models: ModelRegistry, type_a: str | None, type_b: str | None, gpu: str | None, mechanism: str,
                 caps: Sequence[float | None]) -> PairAtCaps:
    """``type_a`` and ``type_b`` sharing one GPU of ``gpu`` under each of ``caps`` (None: full power)."""
    c = np.array([1.0 if cap is None else cap for cap in caps], dtype=float)
    rate, power = [], []
    for job_type in (type_a, type_b):
        model = models.for_job(job_type or None, gpu)
        rate.append(np.array([model.throughput(Config(1, 1, x)) for x in c.tolist()]) / model.throughput(Config(1)))
        power.append(np.array([model.power_w(Config(1, 1, x)) for x in c.tolist()]))
    n = len(c)
    slow_a, slow_b, pair_w = models.colocation_arrays([type_a or None] * n, [type_b or None] * n, gpu, mechanism,
                                                      power[0], power[1], cap_fraction=c)
    return PairAtCaps(c, rate[0], rate[1], power[0], power[1], slow_a, slow_b, pair_w)


def pair_cap(models: ModelRegistry, type_a: str, type_b: str, gpu: str | None, mechanism: str,
             bound: float) -> float | None:
    """Zeus's energy-optimal cap for a pair on one GPU: among ``allowed_caps``, the one with the
    least pair power (bounded by the cap, ``pair_at_caps``) per unit of both jobs' work (each
    job's work rate at the cap over its rate alone at full power, divided by its co-location
    slowdown), each job's stretch within ``bound``; among equals the highest cap. None (full
    power) for 1.0."""
    pair = pair_at_caps(models, type_a, type_b, gpu, mechanism, models.allowed_caps(gpu))
    energy = np.round(pair.pair_w / (1.0 / pair.stretch_a + 1.0 / pair.stretch_b), 9)
    energy = np.where((pair.stretch_a <= bound) & (pair.stretch_b <= bound), energy, np.inf)
    if not np.isfinite(energy).any():
        return None
    cap = float(pair.caps[energy == energy.min()].max())
    return None if cap >= 1.0 else round(cap, 3)


def cap_rate(models: ModelRegistry, job_type: str, gpu: str | None, cap: float | None) -> float:
    """Throughput of one GPU at ``cap`` over its throughput at full power (None: 1)."""
    model = models.for_job(job_type or None, gpu)
    return model.throughput(Config(1, 1, cap or 1.0)) / model.throughput(Config(1))


def _take(free: dict[str, int], gpus: int, pinnable: set[str] | None = None,
          allowed: frozenset[str] | None = None) -> str | None:
    """Take ``gpus`` free GPUs on the fullest node that has them (best fit; among the nodes in
    both ``pinnable`` and ``allowed`` (the job's partition), each None: any): the node a host is
    pinned to (None if none fits)."""
    fitting = [(count, name) for name, count in free.items() if count >= gpus
               and (pinnable is None or name in pinnable) and (allowed is None or name in allowed)]
    if not fitting:
        return None
    name = min(fitting)[1]
    free[name] -= gpus
    return name


@dataclass
class _FreeMemo:
    """The last snapshot's node tuple and its free GPUs per node, in a controller's memo (the
    simulator keeps the same tuple while no node changes): a tick re-reads the nodes only
    when they changed."""

    nodes: tuple[Node, ...] | None = None
    free: dict[str, int] = field(default_factory=dict)


def _free_gpus(snapshot: ClusterSnapshot, memo: DecisionMemo) -> dict[str, int]:
    """Free GPUs per node with any, a copy the caller may take from."""
    held = memo.get(_FreeMemo)
    if held.nodes is not snapshot.nodes:
        held.nodes = snapshot.nodes
        held.free = {node.name: node.gpus_free for node in snapshot.nodes if node.gpus_free > 0}
    return dict(held.free)


def running_hosts(snapshot: ClusterSnapshot, share_limit: int, max_gpus: int) -> list[Host]:
    """Running jobs on shards that accept sharing, of at most ``max_gpus`` GPUs, less the
    partners already on their GPUs; none beside a shard job of its node that is not its partner."""
    if share_limit < 2:
        return []
    shard_jobs = [job for job in snapshot.jobs
                  if job.state is JobState.RUNNING and job.shards_per_node > 0 and not job.gpus_per_node]
    by_node: dict[tuple[str, ...], list[Job]] = {}
    for job in shard_jobs:
        by_node.setdefault(job.nodes, []).append(job)
    named = {job.job_id: named_partner(job) for job in shard_jobs}
    hosts = []
    for job in shard_jobs:
        options = parse_marker(job.admin_comment)
        layout = _layout(job)
        if options is None or not options.accept_share or layout[0] * layout[1] > max_gpus:
            continue
        others = [o.job_id for o in by_node[job.nodes] if o.job_id != job.job_id]
        partners = [o for o in others if named[o] == job.job_id or named[job.job_id] == o]
        first = min(partners, default=job.job_id) >= job.job_id  # a GPU's first job hosts for it
        if len(partners) < len(others) or len(partners) >= share_limit - 1 or not first:
            continue
        hosts.append(Host(job.job_id, job.name, job.gpu_type, layout, share_limit - 1 - len(partners), True,
                          job.nodes, options.accept_cap, _token_cap(job), cap_settled=True))
    return hosts


def _payload(job: Job) -> dict[str, object]:
    """The job's decision token, unverified (a policy holds no key; see the module docstring)."""
    token = decision_token.find_token(job.comment)
    try:
        return decision_token.unverified_payload(token) if token else {}
    except decision_token.InvalidToken:
        return {}


def named_partner(job: Job) -> int | None:
    """The partner the job's decision token names, if any."""
    partner = _payload(job).get("share")
    return partner if isinstance(partner, int) and not isinstance(partner, bool) else None


def _token_cap(job: Job) -> float | None:
    """The cap the job's decision token carries (what its GPU runs under), if any."""
    cap = _payload(job).get("cap")
    return float(cap) if isinstance(cap, (int, float)) and not isinstance(cap, bool) else None
