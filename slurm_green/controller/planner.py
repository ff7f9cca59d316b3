"""From a policy's decisions to the backend actions that are not yet in force.

Planning is a diff against the snapshot, which is what makes a tick idempotent: a
controller killed after enacting half a plan finds those changes already in force
at its next tick and does not repeat them.

Co-location (``JobDecision.share_with``) is enacted with Slurm's ``gres/shard``: both jobs
of a pair ask for shards of one GPU on one node (docs/enactment.md, "Co-location"). Before
anything is sent, ``colocate`` keeps only the pairs that can be enacted (both jobs allowed
sharing with ``share=yes``, and Slurm's own limits) and gives each pair one power cap,
the loosest of the two.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from slurm_green.core import decision_token, gpu_freq
from slurm_green.core.actions import (Action, SetDecision, SetGpuFreq, SetGpus, SetNodes, SetStartTime, SetTimeLimit,
                                      ShareGpus)
from slurm_green.core.gpu_freq import Enactment
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState, Node, Reservation
from slurm_green.core.decision import DecisionMemo
from slurm_green.core.green_options import parse_marker
from slurm_green.core.partitions import NodeRules, node_rules
from slurm_green.core.plan import JobDecision, Plan, replace_decision
from slurm_green.core.time_limit import (asked_limit, partition_limits, partition_max_times,
                                         slowed_past_max_time, whole_minutes_s)

log = logging.getLogger(__name__)

#: A start time closer than this to the one already set is left alone (no churn).
START_TOLERANCE_S = 60.0

Signer = Callable[[int, dict[str, object]], str]


def decision_payload(decision: JobDecision, enact: Enactment = "power_cap") -> dict[str, object]:
    """What the compute node's Prolog needs to know, and nothing more."""
    payload: dict[str, object] = {}
    if decision.power_cap_fraction is not None and enact == "power_cap":
        payload["cap"] = round(decision.power_cap_fraction, 3)
    if decision.share_with is not None:
        payload["share"] = decision.share_with
    return payload


def _current_payload(job: Job, verify: Callable[[int, str], dict[str, object]] | None) -> dict[str, object] | None:
    token = decision_token.find_token(job.comment)
    if token is None or verify is None:
        return None
    try:
        return verify(job.job_id, token)
    except decision_token.InvalidToken:
        return None


def _start_actions(job: Job, decision: JobDecision, now: float) -> list[Action]:
    wanted = now if decision.start_at is None else max(decision.start_at, now)
    current = job.eligible_time
    if current is not None and current <= now and wanted <= now + START_TOLERANCE_S:
        return []  # already eligible and should be
    if current is not None and abs(current - wanted) < START_TOLERANCE_S:
        return []
    return [SetStartTime(job.job_id, wanted)]


def _size_actions(job: Job, decision: JobDecision) -> list[Action]:
    """GPUs per node, node count and node list, as far as they differ from the job's.

    A pinned node list always travels with its node count: Slurm (22.05 to 26.05) accepts
    ``ReqNodeList=node1,node2`` on a pending job whose ``NumNodes`` is 1 and keeps both,
    a job that can then never start as decided. Slurm applies the fields of one update
    whatever their order on the command line, so the two go as two actions that the
    backend merges into one ``scontrol update`` (``slurm.commands``). The snapshot's
    ``nodes`` of a pending job is its pin (``ReqNodeList``); an empty decided list clears it.
    """
    nodes = tuple(decision.nodes) if decision.nodes is not None else None
    count = len(nodes) if nodes else decision.num_nodes
    gpus_changed = decision.gpus_per_node is not None and decision.gpus_per_node != job.gpus_per_node
    count_changed = count is not None and count != job.num_nodes
    actions: list[Action] = []
    if gpus_changed or count_changed:
        per_node = decision.gpus_per_node if decision.gpus_per_node is not None else job.gpus_per_node
        actions.append(SetGpus(job.job_id, per_node, count if count_changed else None))
    if nodes is not None and sorted(nodes) != sorted(job.nodes):  # Slurm keeps a pin as a set
        actions.append(SetNodes(job.job_id, nodes))
    return actions


def _limit_actions(job: Job, decision: JobDecision, limits: Mapping[str, float | None],
                   max_time_s: float | None) -> list[Action]:
    """The time limit the decision needs, as far as it differs from the job's (a minute's tolerance).

    A decision that slows the job (a cap, fewer GPUs, a shared GPU) would otherwise let Slurm
    stop it at the limit its user set for the configuration asked. The limit becomes the
    decision's expected runtime, whole minutes, since that runtime is the limit as submitted
    (the marker's, which ``managed.asked_runtime_s`` reads as the job's work) times the slowdown:
    the user's own margin grows with it. Never below the limit as submitted; one the controller
    raised comes back down when a later decision no longer slows the job; a limit its user
    lowered is left alone unless the job is slowed; never above the partition's ``MaxTime``.
    The limit as submitted is the marker's, else the partition's default (``limits``:
    ``time_limit.partition_limits``); nothing is done without either (an unlimited job) or
    without an expected runtime.
    """
    limit = _decided_limit(job, decision, limits, max_time_s)
    return [SetTimeLimit(job.job_id, limit)] if limit is not None and limit != job.time_limit_s else []


def _decided_limit(job: Job, decision: JobDecision, limits: Mapping[str, float | None],
                   max_time_s: float | None) -> float | None:
    """The time limit the job has once the decision is enacted (``_limit_actions``); None for
    none (unlimited)."""
    asked = asked_limit(job, limits)
    expected = decision.expected_runtime_s
    current = job.time_limit_s
    if asked is None or expected is None or not math.isfinite(expected):
        return current
    wanted = _bounded_limit(asked, expected, max_time_s)
    if current is not None and (abs(current - wanted) < 60.0 or (wanted <= asked and current <= asked)):
        return current
    return wanted


def _host_limit_actions(host: Job, stretch: float | None, limits: Mapping[str, float | None],
                        max_time_s: float | None) -> list[Action]:
    """The time limit a **running** job needs once a guest joins its GPU (``JobDecision.partner_stretch``).

    It runs slower from then on, and Slurm would stop it at the limit set for running alone.
    The limit becomes its limit as submitted times the stretch, as if it had shared its GPU
    for its whole run: more than the rest of its run needs, and the same figure at every
    tick its guest waits, so a raise is never raised again (the job's limit now, read back,
    would be). Only ever raised (a running job's limit coming down could stop it), never above
    the partition's ``MaxTime``, and nothing for a job without a limit.
    """
    asked = asked_limit(host, limits)
    if asked is None or host.time_limit_s is None or stretch is None or not stretch > 1.0:
        return []
    wanted = _bounded_limit(asked, asked * stretch, max_time_s)
    return [SetTimeLimit(host.job_id, wanted)] if wanted >= host.time_limit_s + 60.0 else []


def _bounded_limit(asked: float, expected_s: float, max_time_s: float | None) -> float:
    """``expected_s`` in whole minutes, never below ``asked`` nor above ``max_time_s`` (unless
    ``asked`` already is)."""
    wanted = max(asked, whole_minutes_s(expected_s))
    return min(wanted, max(max_time_s, asked)) if max_time_s else wanted


def sharing_allowed(job: Job | None) -> bool:
    """Marked by job_submit.lua as managed with ``share=yes``, and asking its GPUs per node (a
    share rewrites them as ``Gres=``: ``Job.gpus_per_node_only``): the only jobs the controller
    co-locates."""
    options = parse_marker(job.admin_comment) if job is not None else None
    return bool(options and options.managed and options.accept_share and job is not None and job.gpus_per_node_only)


@dataclass(frozen=True, slots=True)
class Sharing:
    """A co-location the planner can enact: the partner, the one node of the pair."""

    partner: Job
    node: tuple[str, ...]


def _single_gpu(job: Job, decision: JobDecision | None) -> bool:
    gpus = decision.gpus_per_node if decision is not None and decision.gpus_per_node is not None else job.gpus_per_node
    nodes = decision.num_nodes if decision is not None and decision.num_nodes is not None else job.num_nodes
    return nodes == 1 and (gpus <= 1 or job.shards_per_node > 0)


def _promised_cap(job: Job, decision: JobDecision | None,
                  verify: Callable[[int, str], dict[str, object]] | None) -> float | None:
    """The cap a job of a pair was promised: its decision's, or, running, the one its token carries."""
    if decision is not None:
        return decision.power_cap_fraction
    cap = (_current_payload(job, verify) or {}).get("cap")
    return float(cap) if isinstance(cap, (int, float)) and not isinstance(cap, bool) else None


def colocate(plan: Plan, snapshot: ClusterSnapshot,
             verify: Callable[[int, str], dict[str, object]] | None = None) -> tuple[Plan, dict[int, Sharing]]:
    """The plan with only the co-locations that can be enacted, each pair under one cap.

    A share is dropped (logged; the job is then decided alone) unless both jobs allow
    sharing, each is in at most one pair, the partner is
    still pending or running, a pending partner is decided too (its token must carry the
    pair's cap), the snapshot's Slurm can enact it (``_slurm_cannot``) and, on Slurm, one
    node is known for the pair: the decision's pin, else the partner's node, else (a
    pending pair no one placed) a node with a whole GPU free (``_free_gpu_node``). A
    snapshot that names no Slurm version (the simulator) skips the Slurm-only conditions.
    The kept decisions name the pair's node, so planning the returned plan again gives the
    same pairs. The pair's cap is the loosest of the two promised (no cap if either has none): a GPU
    runs at the loosest wish of its jobs (the Prolog's rule), so each token then names
    the cap in force and neither job runs slower than it was promised.
    """
    decided = {d.job_id: d for d in plan.decisions}
    sharing: dict[int, Sharing] = {}
    caps: dict[int, float | None] = {}
    placed: dict[str, int] = {}  # GPUs this plan's pending pairs take, per node
    release = _slurm_release(snapshot.slurm_version)
    for decision in plan.decisions:
        if decision.share_with is None or decision.job_id in caps:
            continue
        job, partner = snapshot.job(decision.job_id), snapshot.job(decision.share_with)
        other = decided.get(decision.share_with)
        why = _refusal(job, partner, decision, other, caps.keys())
        if why is None and job is not None and partner is not None:
            why = _slurm_cannot(job, decision, partner, other, release)
        node = decision.nodes or (other.nodes if other is not None and other.nodes else None) or (
            partner.nodes if partner is not None else ()) or (
            _free_gpu_node(snapshot, placed) if why is None and release is not None else ())
        if why is None and not node and release is not None:
            why = "no node has a free GPU with shards for the pair"
        if why is not None or job is None or partner is None:
            log.warning("job %s: not co-located with job %s: %s", decision.job_id, decision.share_with, why)
            continue
        cap = _loosest(_promised_cap(job, decision, verify), _promised_cap(partner, other, verify))
        sharing[job.job_id] = Sharing(partner, tuple(node))
        caps[job.job_id] = caps[partner.job_id] = cap
        if other is not None:
            sharing[partner.job_id] = Sharing(job, tuple(node))
    decisions = []
    for decision in plan.decisions:
        if decision.job_id in sharing:
            pair = sharing[decision.job_id]
            decision = dataclasses.replace(decision, share_with=pair.partner.job_id, nodes=pair.node or decision.nodes,
                                           power_cap_fraction=caps[decision.job_id])
        elif decision.share_with is not None:
            decision = dataclasses.replace(decision, share_with=None)
        decisions.append(decision)
    return dataclasses.replace(plan, decisions=tuple(decisions)), sharing


def enactable(plan: Plan, snapshot: ClusterSnapshot,
              verify: Callable[[int, str], dict[str, object]] | None = None,
              memo: DecisionMemo | None = None) -> tuple[Plan, dict[int, Sharing]]:
    """The plan as it will be enacted: no pin or size for a job whose shape stays as submitted
    (``shape_as_submitted``), only what the job's partition can hold (``within_partition``), no
    pin to a node without the CPUs or memory to start the job (``where_jobs_fit``), no job
    slowed past its partition's ``MaxTime`` (``within_max_time``), no size whose CPUs or memory per
    node no node has (``sized_to_fit_nodes``), no start decided for a job
    in a reservation (``started_as_reserved``), no size Slurm's QOS or association limits held
    back (``within_site_limits``), no pin to a node another reservation holds
    before the job would end (``clear_of_reservations``), no start or limit that runs into a
    reservation of every node the job may use where the job as submitted would end before it
    (``ahead_of_reservations``), and only the co-locations that can be enacted (``colocate``)."""
    shaped = within_site_limits(shape_as_submitted(started_as_reserved(plan, snapshot), snapshot), snapshot, memo)
    sized = sized_to_fit_nodes(within_partition(shaped, snapshot, memo), snapshot, memo)
    fitting = clear_of_reservations(where_jobs_fit(sized, snapshot), snapshot)
    fitting = ahead_of_reservations(fitting, snapshot, memo)
    return colocate(within_max_time(fitting, snapshot, memo), snapshot, verify)


def started_as_reserved(plan: Plan, snapshot: ClusterSnapshot) -> Plan:
    """The plan with every pending job that Slurm runs in an advance reservation
    (``Job.reservation``) started as Slurm schedules it: its decided start dropped (a job
    job_submit.lua deferred is released), its cap kept.

    A reservation's nodes are held for its jobs over its hours, so deferring one saves the
    grid nothing (the GPUs stand idle meanwhile) and can cost the job its reservation: a job
    whose begin time is past the reservation's end is held by Slurm when the reservation ends
    (seen on 24.11: ``JobState=RESV_DEL_HOLD``) until its user releases or cancels it. The
    controller does not read reservations' ends; it need not, once no start is decided."""
    def change(decision: JobDecision, job: Job) -> JobDecision | None:
        if not job.reservation or decision.start_at is None:
            return None
        return replace_decision(decision, start_at=None,
                                reason=f"{decision.reason}; starts when Slurm starts it in reservation {job.reservation}")

    return _per_pending_job(plan, snapshot, change)


def _per_pending_job(plan: Plan, snapshot: ClusterSnapshot,
                     change: Callable[[JobDecision, Job], JobDecision | None]) -> Plan:
    """The plan with ``change(decision, job)`` in place of each decision for a pending job where
    it gives one (None: kept); the very same plan where nothing changed."""
    decisions = []
    changed = False
    for decision in plan.decisions:
        job = snapshot.job(decision.job_id)
        new = change(decision, job) if job is not None and job.is_pending else None
        if new is not None:
            decision, changed = new, True
        decisions.append(decision)
    return dataclasses.replace(plan, decisions=tuple(decisions)) if changed else plan


#: How Slurm names a wait for a QOS or association limit (``job_reason_string``:
#: ``QOSMaxGRESPerUser``, ``QOSGrpGRES``, ``AssocMaxGRESPerJob``, ``QOSMinGRES``, ...).
_SITE_LIMIT = re.compile(r"^(QOS|Assoc)(Grp|Max|Min)")


@dataclass
class _SubmittedSizes:
    """Per pending job the controller resized: its (nodes, GPUs per node) before the first
    resize, and, once Slurm held it for a site limit at another size, why (its size then stays
    as submitted)."""

    sizes: dict[int, tuple[int, int]] = field(default_factory=dict)
    held: dict[int, str] = field(default_factory=dict)


def within_site_limits(plan: Plan, snapshot: ClusterSnapshot, memo: DecisionMemo | None) -> Plan:
    """The plan with a pending job that Slurm holds for a QOS or association limit
    (``Reason=QOSMaxGRESPerUser`` and the like) at a size a decision gave it put back to the
    size it had before the controller first resized it, uncapped, and kept there while it waits.

    Sites limit GPUs per user, account or job (``sacctmgr ... MaxTRESPerUser=gres/gpu=2``) and
    Slurm takes an update past the limit: seen on 24.11 with ``AccountingStorageEnforce=limits``,
    GreenFlow grew a 1-GPU job to 4 GPUs against a limit of 2 and the job stayed pending
    (``QOSMaxGRESPerUser``) with nothing else running, where Slurm alone had started it at
    once. The controller does not read the limits (their hierarchy of QOS, associations and
    partition QOS, and their usage, is Slurm's to weigh); it reads Slurm's verdict, so the job
    waits at most one tick more than it would have (``_as_submitted``). The sizes are kept in
    the controller's memo, which a restarted controller fills from its store
    (``remember_sizes``)."""
    if memo is None:
        return plan
    known = memo.get(_SubmittedSizes)
    for job_id in [job_id for job_id in known.sizes if not ((job := snapshot.job(job_id)) and job.is_pending)]:
        known.sizes.pop(job_id)
        known.held.pop(job_id, None)
    def change(decision: JobDecision, job: Job) -> JobDecision | None:
        submitted = known.sizes.get(job.job_id)
        if submitted is None:
            if _resizes(decision, job):
                known.sizes[job.job_id] = (job.num_nodes, job.gpus_per_node)
            return None
        if submitted != (job.num_nodes, job.gpus_per_node) and _SITE_LIMIT.match(job.state_reason):
            known.held[job.job_id] = (f"Slurm held it for a site limit ({job.state_reason}) at "
                                      f"{job.total_gpus} GPU(s), so its size stays as submitted")
        why = known.held.get(job.job_id)
        if why is None:
            return None
        return _as_submitted(decision, job, known.sizes, limits, f"{why}, uncapped")

    limits = partition_limits(snapshot)
    return _per_pending_job(plan, snapshot, change)


def remember_sizes(memo: DecisionMemo, sizes: Mapping[int, tuple[int, int]]) -> None:
    """Give ``within_site_limits`` the sizes jobs had before any decision (the store's
    ``asked_sizes``), so that a restarted controller still puts a job held for a limit back."""
    known = memo.get(_SubmittedSizes).sizes
    for job_id, size in sizes.items():
        known.setdefault(job_id, size)


def _resizes(decision: JobDecision, job: Job) -> bool:
    return ((decision.gpus_per_node is not None and decision.gpus_per_node != job.gpus_per_node)
            or (decision.num_nodes is not None and decision.num_nodes != job.num_nodes))


def shape_as_submitted(plan: Plan, snapshot: ClusterSnapshot) -> Plan:
    """The plan without a pin, a node list cleared, a size or a share for a pending job whose
    nodes and size stay as submitted (``GreenOptions.shape_fixed``), and without a share naming
    one: a job whose user chose or narrowed its nodes (``-w``, ``-x``, ``-C`` or
    ``--reservation``: the marker's ``own_nodes``), or an array (``array``).

    Where such a job runs is the user's: a pin elsewhere overrides their ``-w``, and a pin to a
    node their ``-x``, ``-C`` or reservation rules out is taken by Slurm and leaves the job
    pending (seen on 24.11: ``Reason=BadConstraints`` for ever, deadline or not;
    ``Reason=Reservation`` while the reservation lasts); clearing its node list drops their
    ``-w``; what size fits on the nodes they named is theirs to know. An array's pending tasks
    are one record here and in Slurm, so one decision's pin and size bind every task: on 24.11 an
    8-task array of 1-GPU jobs, grown to 2 GPUs and pinned to one node, ran two tasks at a time
    there while three nodes had GPUs free. Such a decision keeps its start and its cap. Policies
    see these jobs at their requested size only (``GreenOptions.gpu_bounds``); this holds every
    policy, and any pin, to it."""
    fixed: dict[int, str] = {}  # job id -> why its shape stays
    for decision in plan.decisions:
        if decision.nodes is None and decision.gpus_per_node is None and decision.num_nodes is None \
                and decision.share_with is None:
            continue
        job = snapshot.job(decision.job_id)
        options = parse_marker(job.admin_comment) if job is not None and job.is_pending else None
        if options is not None and options.shape_fixed:
            fixed[decision.job_id] = ("its user chose its nodes, so where it runs and its size are the user's"
                                      if options.own_nodes else "an array: one pin or size would bind every task, "
                                                                "so where its tasks run and their size stay as submitted")
    if not fixed:
        return plan
    decisions = []
    for decision in plan.decisions:
        why = fixed.get(decision.job_id)
        if why is not None:
            log.info("job %s: decided size or pin dropped: %s", decision.job_id, why)
            decision = replace_decision(decision, nodes=None, gpus_per_node=None, num_nodes=None, share_with=None,
                                        partner_stretch=None, reason=f"{decision.reason}; as asked: {why}")
        elif decision.share_with in fixed:
            decision = replace_decision(decision, share_with=None, partner_stretch=None, nodes=None,
                                        reason=f"{decision.reason}; not co-located: its partner keeps its shape "
                                               f"as submitted")
        decisions.append(decision)
    return dataclasses.replace(plan, decisions=tuple(decisions))


def within_partition(plan: Plan, snapshot: ClusterSnapshot, memo: DecisionMemo | None = None) -> Plan:
    """The plan without what Slurm would refuse for a pending job: a pin to a node outside its
    partition(s), more GPUs per node than any node there has, more nodes than its partitions'
    ``MaxNodes`` (taken, and the job left pending with ``Reason=PartitionNodeLimit``) or than the
    tasks its user gave (``-n``: taken, and the job left pending for ever), whole
    GPUs for a job that asked for none (a CPU job, or one on shards of a GPU), or a size for one
    that asked its GPUs per job, task or socket (``Job.gpus_per_node_only``: ``Gres=`` is refused
    on a ``--gpus`` job, and on a ``--gpus-per-task`` one raises its task count). A job that asked for a GPU type
    (``--gres=gpu:h100:2``) is held to its partitions' nodes of that type alone, pin and width:
    a policy plans a type no node has as the cluster's majority (``gpu_types.gpu_pools``), and
    where no node there has it the job gets no pin and no size change. A size change (GPUs per
    node, or a node count at the job's own GPUs per node) must fit the widest of those nodes.

    Slurm refuses such an update, and the job's start waits for its other updates
    (``enactment``), so the job would wait until its deadline, the same update refused at
    every tick. The decision keeps the rest: its start, its cap. A pin dropped so clears the
    job's pin (an earlier one may be as wrong) and its share (the pin was for it). Which nodes
    a job may run on is ``core.partitions``' rule, the one the placing policies follow too (a
    partition whose node list is not known holds every node; a type is checked only where
    nodes report types), so this only drops what another policy, or a stale pin, decided.
    With the controller's ``memo`` the rule is kept between ticks while the nodes and
    partitions stay the same (``node_rules``), as the policies keep it."""
    rules: NodeRules | None = None  # built at the first decision with a pin or a size: most have neither
    decisions = []
    changed = False
    for original in plan.decisions:
        decision = original
        job = snapshot.job(decision.job_id)
        if job is None or not job.is_pending or not (
                decision.nodes or decision.gpus_per_node is not None or decision.num_nodes is not None):
            decisions.append(decision)
            continue
        rules = rules or node_rules(snapshot, memo)
        allowed = rules.allowed(job)
        kind = job.gpu_type if rules.typed else None  # the type ``allowed`` was held to, for the reasons below
        label = f"{kind} node" if kind else "node"
        size = decision.gpus_per_node if decision.gpus_per_node is not None else (
            job.gpus_per_node if decision.num_nodes is not None else None)
        widest = rules.widest(allowed) if allowed is not None and size is not None else None
        why = []
        if decision.nodes and allowed is not None and not set(decision.nodes) <= allowed:
            why.append(f"its pin is outside its partition's {kind} nodes" if kind
                       else "its pin is outside its partition")
            decision = replace_decision(decision, nodes=_cleared_pin(job), share_with=None,
                                        partner_stretch=None)
        if (decision.gpus_per_node is not None or decision.num_nodes is not None) and not job.gpus_per_node_only:
            why.append("its GPUs are asked per job, task or socket (--gpus, --gpus-per-task), which a Gres= update "
                       "does not replace")
            decision = replace_decision(decision, gpus_per_node=None, num_nodes=None, share_with=None,
                                        partner_stretch=None)
        elif decision.gpus_per_node is not None and job.total_gpus == 0:
            if decision.share_with is None:  # a shared decision's GPU count is its shards' (``_share_actions``)
                why.append("it asked for no whole GPU")
            decision = replace_decision(decision, gpus_per_node=None, num_nodes=None)
        elif size is not None and widest is not None and size > widest:
            why.append(f"no {label} of its partition holds {size} GPUs" if widest or not kind
                       else f"no node of its partition has {kind} GPUs")
            decision = replace_decision(decision, gpus_per_node=None, num_nodes=None,
                                        nodes=_cleared_pin(job), share_with=None, partner_stretch=None)
        elif (past := _past_max_nodes(decision, job, rules)) is not None:
            why.append(f"its partition gives a job at most {past[1]} node(s) (MaxNodes), not {past[0]}")
            decision = replace_decision(decision, gpus_per_node=None, num_nodes=None,
                                        nodes=_cleared_pin(job), share_with=None, partner_stretch=None)
        elif (past := _past_tasks(decision, job)) is not None:
            why.append(f"its user gave it {past[1]} task(s) (-n), which span no more nodes, not {past[0]}")
            decision = replace_decision(decision, gpus_per_node=None, num_nodes=None,
                                        nodes=_cleared_pin(job), share_with=None, partner_stretch=None)
        changed = changed or decision is not original
        if why:
            log.info("job %s: decided size or pin dropped: %s", job.job_id, "; ".join(why))
            decision = replace_decision(decision, reason=f"{decision.reason}; as asked: {'; '.join(why)}")
        decisions.append(decision)
    return dataclasses.replace(plan, decisions=tuple(decisions)) if changed else plan


def sized_to_fit_nodes(plan: Plan, snapshot: ClusterSnapshot, memo: DecisionMemo | None = None) -> Plan:
    """The plan with a pending job that asks CPUs or memory per GPU (``--cpus-per-gpu``,
    ``--mem-per-gpu``) grown to no more GPUs
    per node than some node it may run on has the CPUs and memory for (counting all of them, free
    or not); where fewer than decided, uncapped (the cap was priced for the larger size; at its
    own size or more the limit it has holds it).

    The policies size jobs by GPUs, and Slurm takes an update whose CPUs or memory no node has:
    seen on 24.11, GreenFlow grew a ``--cpus-per-gpu=32`` job from 1 GPU to 4 on 64-CPU nodes
    (128 CPUs), and a ``--mem-per-gpu=200000`` one to 4 on 512,000-MiB nodes, and both stayed
    pending for ever (``Reason=BadConstraints``) where Slurm alone had started them at once."""
    rules = node_rules(snapshot, memo)

    def change(decision: JobDecision, job: Job) -> JobDecision | None:
        wanted = decision.gpus_per_node
        if wanted is None or wanted <= job.gpus_per_node or not (job.cpus_per_gpu or job.memory_per_gpu_mib):
            return None
        may = rules.allowed(job) or rules.names
        most = rules.most_gpus_per_node(job, may) if may else 0
        if not may or wanted <= most:
            return None
        grown = most if most > job.gpus_per_node else None
        why = (f"{wanted} GPU(s) a node would need more CPUs or memory than any node it may run on has "
               f"(it asks them per GPU)")
        log.info("job %s: %s", job.job_id, why)
        return replace_decision(decision, gpus_per_node=grown, nodes=_cleared_pin(job), share_with=None,
                                partner_stretch=None, power_cap_fraction=None, expected_runtime_s=None,
                                reason=f"{decision.reason}; {why}: {grown or job.gpus_per_node} a node, uncapped")

    return _per_pending_job(plan, snapshot, change)


def where_jobs_fit(plan: Plan, snapshot: ClusterSnapshot) -> Plan:
    """The plan without a pin, for a pending job decided to start now, to a node that lacks the
    job's CPUs (``Job.cpus_per_node``) or memory (``Job.memory_per_node_mib``) free, counting
    what this plan's earlier pins there take; nor, for a job that takes its nodes whole (in a
    partition with ``OverSubscribe=EXCLUSIVE``), to a node that runs anything or that an
    earlier pin of this plan takes; nor, for any job, to a node an earlier pin of this plan gave
    such a job. A job's own ``--exclusive`` is not read (squeue's text and JSON do not show it
    alike on every version); a node where such a job runs shows its CPUs all taken.

    The policies place by GPUs alone, and a node whose CPUs or memory other jobs hold shows its
    GPUs free: seen on 24.11, GreenFlow pinned a 1-GPU job to node3 while all 64 of its CPUs
    ran a CPU job (or one job held all its memory), and the job waited (``Reason=Resources``)
    with node1 and node2 idle; on a partition with ``OverSubscribe=EXCLUSIVE`` it pinned three
    1-GPU jobs to node1, one ran there alone and two waited (``Resources``) with three nodes
    idle. Without the pin Slurm places the job where it fits, at its decided size, start and
    cap; a share, which needs the pin, goes with it. A node or job whose CPUs or memory are not
    known is not checked for them, nor is a later start (what is free then is not known)."""
    resources = [(name, {node.name: free(node) for node in snapshot.nodes}, need)
                 for name, free, need in _FITTED if any(free(node) is not None for node in snapshot.nodes)]
    exclusive = {p.name for p in snapshot.partitions if p.exclusive}
    if not resources and not exclusive:
        return plan
    defaults = [p.name for p in snapshot.partitions if p.default]
    busy = {node.name for node in snapshot.nodes if node.gpus_allocated or node.cpus_allocated
            or node.memory_allocated_mib}
    taken: dict[tuple[str, str], int] = {}
    pinned_now: set[str] = set()  # nodes an earlier pin of this plan takes a part of
    whole: set[str] = set()  # nodes an earlier pin of this plan takes whole
    decisions = []
    changed = False
    for decision in plan.decisions:
        job = snapshot.job(decision.job_id)
        if (job is None or not job.is_pending or not decision.nodes
                or (decision.start_at is not None and decision.start_at > snapshot.taken_at + START_TOLERANCE_S)):
            decisions.append(decision)
            continue
        pinned = decision.nodes
        per_node = decision.gpus_per_node if decision.gpus_per_node is not None else job.gpus_per_node
        short = [f"{node} lacks its {wanted} {name} free"
                 for name, free_on, need in resources if (wanted := need(job, per_node)) > 0 for node in pinned
                 if (free := free_on.get(node)) is not None and free - taken.get((name, node), 0) < wanted]
        short += [f"{node} goes whole to a job decided before it" for node in pinned if node in whole]
        takes_whole = bool(exclusive.intersection(job.partition.split(",") if job.partition else defaults))
        if takes_whole:
            short += [f"{node} runs other jobs and it takes its nodes whole" for node in pinned
                      if (node in busy or node in pinned_now) and node not in whole]
        if short:
            decision = _unpinned(decision, job, f"as asked: {'; '.join(short)}, so Slurm places it")
            changed = True
        else:
            for name, _, need in resources:
                for node in pinned:
                    taken[name, node] = taken.get((name, node), 0) + need(job, per_node)
            pinned_now.update(pinned)
            if takes_whole:
                whole.update(pinned)
        decisions.append(decision)
    return dataclasses.replace(plan, decisions=tuple(decisions)) if changed else plan


def clear_of_reservations(plan: Plan, snapshot: ClusterSnapshot) -> Plan:
    """The plan without a pin, for a pending job, to a node that a reservation the job does not
    run in holds at some time between the job's decided start and its end by the time limit it
    will have (a decided raise counted; no limit: no end).

    Slurm starts no job on a reserved node whose time limit reaches into the reservation, and
    the policies see a node free until its reservation begins: seen on 24.11, GreenFlow pinned
    a 90-minute job to node1 (an H100, the type it runs fastest on) an hour before a
    maintenance of node1 and node2, and the job waited for the maintenance to end (three hours)
    with node3 and node4 idle. Without the pin Slurm places the job where it can, at its
    decided size, start and cap; a share, which needs the pin, goes with it. A reservation
    that starts at once also marks its nodes ``RESERVED``, and the policies place nothing on
    such a node (``Node.available``)."""
    if not snapshot.reservations:
        return plan
    held: dict[str, list[Reservation]] = {}
    for reservation in snapshot.reservations:
        for node in reservation.nodes:
            held.setdefault(node, []).append(reservation)
    limits, max_times = partition_limits(snapshot), partition_max_times(snapshot)
    now = snapshot.taken_at
    def change(decision: JobDecision, job: Job) -> JobDecision | None:
        if not decision.nodes or not held.keys() & set(decision.nodes):
            return None
        start = max(now, decision.start_at if decision.start_at is not None else now)
        limit = _decided_limit(job, decision, limits, max_times.get(job.partition))
        end = start + limit if limit is not None else math.inf
        clashes = [f"{node} is in reservation {r.name} {_from(r.start, now)}" for node in decision.nodes
                   for r in held.get(node, ()) if r.name != job.reservation and r.overlaps(start, end)]
        if not clashes:
            return None
        return _unpinned(decision, job, f"{'; '.join(clashes)}, before it would end, so Slurm places it")

    return _per_pending_job(plan, snapshot, change)


def ahead_of_reservations(plan: Plan, snapshot: ClusterSnapshot, memo: DecisionMemo | None = None) -> Plan:
    """The plan with a pending job started at once where its decided start, or the limit its
    decision gives it, runs into a reservation (not its own) of every node it may run on (a
    maintenance of the partition), while the job as submitted, started now, would end before
    that reservation begins: at its decided size and cap where those end before it too, else as
    submitted (``_as_submitted``).

    Slurm starts no job whose limit reaches into such a reservation, so the job would wait for
    the reservation's end (hours, for a maintenance) where Slurm alone could have run it first.
    A job that would run into it even as submitted waits for it under Slurm alone too: its
    decision stands."""
    upcoming = [r for r in snapshot.reservations if r.start > snapshot.taken_at and r.nodes]
    if not upcoming:
        return plan
    rules = node_rules(snapshot, memo)
    limits, max_times = partition_limits(snapshot), partition_max_times(snapshot)
    sizes = memo.get(_SubmittedSizes).sizes if memo is not None else {}
    now = snapshot.taken_at
    def change(decision: JobDecision, job: Job) -> JobDecision | None:
        may = rules.allowed(job) or rules.names
        walls = [r for r in upcoming if r.name != job.reservation and may <= set(r.nodes)] if may else []
        asked = asked_limit(job, limits) or job.time_limit_s
        if not walls or asked is None or any(r.overlaps(now, now + asked) for r in walls):
            return None
        start = max(now, decision.start_at if decision.start_at is not None else now)
        limit = _decided_limit(job, decision, limits, max_times.get(job.partition))
        wall = next((r for r in walls if r.overlaps(start, start + limit if limit is not None else math.inf)), None)
        if wall is None:
            return None
        why = f"reservation {wall.name} holds every node it may run on {_from(wall.start, now)}"
        log.info("job %s: started now: %s", job.job_id, why)
        if limit is not None and not any(r.overlaps(now, now + limit) for r in walls):
            return replace_decision(decision, start_at=None,
                                    reason=f"{decision.reason}; started now: {why}, before it would end")
        return replace_decision(_as_submitted(decision, job, sizes, limits,
                                              f"as submitted, now: {why}, before it would end as decided"),
                                start_at=None)

    return _per_pending_job(plan, snapshot, change)


def _unpinned(decision: JobDecision, job: Job, why: str) -> JobDecision:
    """The decision without its pin (one an earlier tick set is cleared) and without the share
    that needs it: Slurm places the job, at its decided size, start and cap."""
    log.info("job %s: decided pin dropped: %s", job.job_id, why)
    return replace_decision(decision, nodes=_cleared_pin(job), share_with=None, partner_stretch=None,
                            reason=f"{decision.reason}; {why}")


def _as_submitted(decision: JobDecision, job: Job, sizes: Mapping[int, tuple[int, int]],
                  limits: Mapping[str, float | None], why: str) -> JobDecision:
    """The decision with the job as its user submitted it, its start kept: the size it had before
    the controller first resized it (``sizes``, from ``_SubmittedSizes``; else the size it has),
    no pin the controller set (a node list its user gave stays), no shared GPU, no cap, and its
    time limit as submitted (one a decision raised comes back down).

    The one fallback of every rule that finds a decision would leave the job worse off than
    Slurm alone: the job then runs as under Slurm alone. The size before any resize matters: a
    job an earlier tick shrank and whose limit is brought back to the one submitted would be
    stopped at that limit before it ended."""
    nodes, per_node = sizes.get(job.job_id, (job.num_nodes, job.gpus_per_node))
    resized = (nodes, per_node) != (job.num_nodes, job.gpus_per_node)
    return replace_decision(
        decision, num_nodes=nodes if resized else None, gpus_per_node=per_node if resized else None,
        nodes=_cleared_pin(job), share_with=None, partner_stretch=None, power_cap_fraction=None,
        expected_runtime_s=asked_limit(job, limits), expected_energy_kwh=decision.energy_as_asked_kwh,
        expected_carbon_kg=None, reason=f"{decision.reason}; {why}")


def _cleared_pin(job: Job) -> tuple[str, ...] | None:
    """The node list that clears the controller's pin on ``job`` (an empty one where Slurm holds
    one), or None (leave it) where there is none, or where its user gave it (``-w``: the
    marker's ``own_nodes``)."""
    if not job.nodes:
        return None
    options = parse_marker(job.admin_comment)
    return None if options is not None and options.own_nodes else ()


def _from(start: float, now: float) -> str:
    return "now" if start <= now else f"from {(start - now) / 3600:.1f} h on"


#: What ``where_jobs_fit`` checks on a pinned node: (name in reasons, free on a node or None
#: where not known, a job's need per node with that many GPUs there, or 0 where not known).
_FITTED: tuple[tuple[str, Callable[[Node], int | None], Callable[[Job, int], int]], ...] = (
    ("CPU(s)", lambda node: node.cpus_free,
     lambda job, gpus: job.cpus_per_node_at(gpus) if job.cpus > 0 or job.cpus_per_gpu > 0 else 0),
    ("MiB of memory", lambda node: node.memory_free_mib, lambda job, gpus: job.memory_per_node_mib_at(gpus)),
)


def _past_max_nodes(decision: JobDecision, job: Job, rules: NodeRules) -> tuple[int, int] | None:
    """(nodes decided, ``MaxNodes``) where ``decision`` gives ``job`` more nodes, by count or
    by pin, than it asked for and than its partitions allow; None otherwise."""
    count = decision.num_nodes or len(decision.nodes or ())
    most = rules.max_nodes(job)
    return (count, most) if most is not None and count > max(most, job.num_nodes) else None


def _past_tasks(decision: JobDecision, job: Job) -> tuple[int, int] | None:
    """(nodes decided, tasks) where ``decision`` gives ``job`` more nodes than the task count its
    user gave (``GreenOptions.tasks``): Slurm takes the update and the job then waits for ever
    (seen on 24.11: a ``-n 1`` job decided 2 nodes stayed pending, ``Reason=Resources``, on an
    idle cluster); None otherwise."""
    options = parse_marker(job.admin_comment)
    count = decision.num_nodes or len(decision.nodes or ())
    tasks = options.tasks if options is not None else None
    return (count, tasks) if tasks is not None and count > max(tasks, job.num_nodes) else None


def within_max_time(plan: Plan, snapshot: ClusterSnapshot, memo: DecisionMemo | None = None) -> Plan:
    """The plan with no decision that would slow a pending job past its partition's ``MaxTime``,
    or past its own ``--deadline`` (``Job.deadline``): seen on 24.11, the window policy capped a
    ``--deadline=now+60minutes -t 50`` job, its limit was raised to 61 minutes, and Slurm
    cancelled the job (``JobState=DEADLINE``) before it ran, where alone it had run it.

    A slowed job's limit is raised with its decision (``_limit_actions``), but never past
    ``MaxTime`` (a pending job whose limit exceeds it is left pending, possibly indefinitely:
    sbatch(1)): a job slowed further would be stopped there and its work lost, which is
    worse than any saving. Such a decision is enacted without what slows it: its start is
    kept, the rest is the job as submitted (``_as_submitted``: the size before an earlier
    tick's resize too), and a share naming it is dropped too. A guest whose **running** host it
    would stretch past the host's ``MaxTime`` (``partner_stretch``) does not join it. A guest dropped so keeps the
    rest of its decision but not the pin to its partner's node (which was for the share).
    "Past" is read as the limit would be set: the expected run in whole minutes above both
    ``MaxTime`` and the limit as submitted; jobs whose partition has no ``MaxTime`` or whose
    limit is unknown are left alone.
    Policies that know this plan within it (GreenFlow's guard); this keeps every policy to it.
    """
    max_time = partition_max_times(snapshot)
    limits = partition_limits(snapshot)

    slowed: dict[int, str] = {}  # job id -> what it would outrun
    unshared: set[int] = set()
    for decision in plan.decisions:
        job = snapshot.job(decision.job_id)
        if job is None or not job.is_pending:
            continue
        if slowed_past_max_time(job, decision.expected_runtime_s, limits, max_time):
            slowed[job.job_id] = "its partition's MaxTime"
        elif job.deadline is not None and (limit := _decided_limit(job, decision, limits, max_time.get(job.partition))) \
                and max(snapshot.taken_at, decision.start_at or 0.0) + limit > job.deadline:
            slowed[job.job_id] = "its --deadline (Slurm would cancel it)"
        partner = snapshot.job(decision.share_with) if decision.share_with is not None else None
        if (partner is not None and partner.state is JobState.RUNNING and decision.partner_stretch
                and slowed_past_max_time(partner, None, limits, max_time, decision.partner_stretch)):
            unshared.add(job.job_id)
    if not slowed and not unshared:
        return plan
    sizes = memo.get(_SubmittedSizes).sizes if memo is not None else {}
    decisions = []
    for decision in plan.decisions:
        if (outrun := slowed.get(decision.job_id)) is not None:
            job = snapshot.job(decision.job_id)
            assert job is not None  # only pending jobs were found slowed
            log.info("job %s: enacted as asked: as decided (%.0f s) it would outrun %s",
                     decision.job_id, decision.expected_runtime_s or 0.0, outrun)
            decision = _as_submitted(decision, job, sizes, limits,
                                     f"enacted as asked: so slowed it would outrun {outrun}")
        elif decision.job_id in unshared or decision.share_with in slowed:
            decision = replace_decision(decision, share_with=None, partner_stretch=None, nodes=None,
                                        reason=f"{decision.reason}; not co-located: its partner would outrun "
                                               f"its partition's MaxTime")
        decisions.append(decision)
    return dataclasses.replace(plan, decisions=tuple(decisions))


def _free_gpu_node(snapshot: ClusterSnapshot, placed: dict[str, int]) -> tuple[str, ...]:
    """For a pending pair that no one pinned: a node with a whole GPU free and no shard in
    use, the fewest free GPUs first (best fit keeps whole nodes for whole-node jobs);
    ``placed`` counts the GPUs this plan's earlier pairs took.

    No shard in use, because Slurm gives a job's shards from the lowest-numbered GPU that
    has enough free (seen on 22.05, 24.11, 26.05): on such a node both jobs of the pair
    get the first free GPU, while a GPU partly used by a third job's shards would take
    the first of the pair and leave the second to the next GPU."""
    fits = [(node.gpus_free - placed.get(node.name, 0), node.name) for node in snapshot.nodes
            if node.shards_total and not node.shards_allocated and node.gpus_free - placed.get(node.name, 0) >= 1]
    if not fits:
        return ()
    name = min(fits)[1]
    placed[name] = placed.get(name, 0) + 1
    return (name,)


def _refusal(job: Job | None, partner: Job | None, decision: JobDecision, other: JobDecision | None,
             paired: Collection[int]) -> str | None:
    if job is None or partner is None or not partner.state.is_active or partner.job_id == job.job_id:
        return "the partner is not an active job"
    if not (sharing_allowed(job) and sharing_allowed(partner)):
        return "sharing needs share=yes from both jobs"
    if partner.job_id in paired or (other is not None and other.share_with not in (None, job.job_id)):
        return "the partner is in another pair (one pair per GPU)"
    if partner.is_pending and other is None:
        return "the pending partner has no decision of its own"
    return None


def _slurm_release(version: str) -> tuple[int, int] | None:
    """(major, minor) of the Slurm the snapshot came from; None for a backend that names no
    Slurm version (the simulator, which models sharing without Slurm's limits)."""
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return None
    return major, minor


def _slurm_cannot(job: Job, decision: JobDecision, partner: Job, other: JobDecision | None,
                  release: tuple[int, int] | None) -> str | None:
    """Why Slurm (this release) cannot enact the pair with shards, if it cannot.

    Slurm gives a job's shards of a node from one GPU, so only jobs of one GPU on one node
    pair up. A GPU allocated whole has no shards to give (22.05, 24.11, 26.05), so a partner running
    on whole GPUs cannot be joined: the job would wait, blocked, until its deadline. 24.11
    and 26.05 turn a pending job's ``gpu`` request into shards (``Gres=shard:K``); 22.05
    refuses ("Invalid generic resource (gres) specification"), and its
    ``TresPerNode=gres/shard:K`` answers success, shows the shards and still allocates the
    whole GPU (all seen on the Docker cluster). Releases between were not tried and count
    as unable."""
    if release is None:
        return None
    if not (_single_gpu(job, decision) and _single_gpu(partner, other)):
        return "only jobs of one GPU on one node can share a GPU"
    if not partner.is_pending and partner.gpus_per_node:
        return f"job {partner.job_id} runs on whole GPUs, and Slurm gives no shards of a GPU allocated whole"
    if release < (24, 11) and (job.gpus_per_node or (partner.is_pending and partner.gpus_per_node)):
        return f"Slurm {'.'.join(map(str, release))} cannot turn a job's whole GPUs into shards"
    return None


def _loosest(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else max(a, b)


def _share_actions(job: Job, sharing: Sharing) -> list[Action]:
    """Shards of one GPU on the pair's node, as far as not yet in force (``ShareGpus`` is
    enacted as a shard request; the pin travels beside it, merged into one update)."""
    actions: list[Action] = []
    if job.gpus_per_node or not job.shards_per_node:
        actions.append(ShareGpus(job.job_id, sharing.partner.job_id))
    if sorted(sharing.node) != sorted(job.nodes):
        actions.append(SetNodes(job.job_id, sharing.node))
    return actions


def job_actions(
    job: Job,
    decision: JobDecision,
    now: float,
    sign: Signer | None,
    verify: Callable[[int, str], dict[str, object]] | None,
    enact: Enactment = "power_cap",
    sharing: Sharing | None = None,
    limits: Mapping[str, float | None] | None = None,
    max_time_s: float | None = None,
) -> list[Action]:
    """Actions for one pending job, ordered so that a job never starts before its
    decision token, GPU clocks, final GPU count, shared GPU and time limit are in place: the
    start comes last. ``decision`` is one ``colocate`` kept (its ``share_with`` enacted through
    ``sharing``); ``limits`` are ``time_limit.partition_limits``, ``max_time_s`` its partition's ``MaxTime``."""
    actions: list[Action] = []
    payload = decision_payload(decision, enact)
    if sign is not None and payload and payload != _current_payload(job, verify):
        actions.append(SetDecision(job.job_id, sign(job.job_id, payload)))
    if enact == "gpu_freq" and decision.power_cap_fraction is not None:
        wanted = gpu_freq.tres_freq(decision.power_cap_fraction)
        if gpu_freq.level_of(job.tres_freq) != gpu_freq.level_of(wanted):
            actions.append(SetGpuFreq(job.job_id, wanted))
    actions.extend(_share_actions(job, sharing) if sharing is not None else _size_actions(job, decision))
    actions.extend(_limit_actions(job, decision, limits or {}, max_time_s))
    actions.extend(_start_actions(job, decision, now))
    return actions


def plan_actions(
    snapshot: ClusterSnapshot,
    plan: Plan,
    now: float,
    sign: Signer | None = None,
    verify: Callable[[int, str], dict[str, object]] | None = None,
    enact: Enactment = "power_cap",
    memo: DecisionMemo | None = None,
) -> list[Action]:
    """All actions the plan needs; decisions for jobs no longer pending are dropped, and
    co-locations that cannot be enacted too (``colocate``)."""
    plan, sharing = enactable(plan, snapshot, verify, memo)
    return enactable_actions(snapshot, plan, sharing, now, sign, verify, enact)


def enactable_actions(
    snapshot: ClusterSnapshot,
    plan: Plan,
    sharing: Mapping[int, Sharing],
    now: float,
    sign: Signer | None = None,
    verify: Callable[[int, str], dict[str, object]] | None = None,
    enact: Enactment = "power_cap",
) -> list[Action]:
    """``plan_actions`` of a plan ``enactable`` already returned, with its ``sharing``: the
    controller has both at hand, and making a plan enactable again at every tick, for every
    decision, was a measurable part of a simulation's time."""
    max_time = partition_max_times(snapshot)
    limits = partition_limits(snapshot)
    actions: list[Action] = []
    for decision in plan.decisions:
        job = snapshot.job(decision.job_id)
        if job is None or not job.is_pending:
            continue
        pair = sharing.get(job.job_id)
        if pair is not None and pair.partner.state is JobState.RUNNING:  # raised before the guest starts
            actions.extend(_host_limit_actions(pair.partner, decision.partner_stretch, limits,
                                               max_time.get(pair.partner.partition)))
        actions.extend(job_actions(job, decision, now, sign, verify, enact, pair, limits,
                                   max_time.get(job.partition)))
    return actions
