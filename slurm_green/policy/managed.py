"""Which pending jobs a policy may touch, with the options job_submit.lua recorded for them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from slurm_green.core.cluster import ClusterSnapshot, Job
from slurm_green.core.decision_token import find_token
from slurm_green.core.green_options import GreenOptions, parse_marker
from slurm_green.core.plan import JobDecision
from slurm_green.core.time_limit import limit_as_submitted

#: The cap that lifts an earlier capped decision: the board's maximum.
NO_CAP = 1.0


def managed_pending(snapshot: ClusterSnapshot) -> Iterator[tuple[Job, GreenOptions]]:
    """Pending jobs whose trusted marker says they are managed, once their user's own
    ``--begin`` has come (``not_yet``) and while nothing else holds them back (``blocked``).

    Only the AdminComment marker counts: users cannot write it, so a user cannot
    bring another job, or their own beyond the site's limits, under a policy.
    """
    for job in snapshot.jobs:
        if not job.is_pending or blocked(job):
            continue
        options = parse_marker(job.admin_comment)
        if options is not None and options.managed and not not_yet(options, snapshot.taken_at):
            yield job, options


def blocked(job: Job) -> bool:
    """Whether Slurm holds the pending job back whatever its start time: held (by its user, an
    admin, or a resize under way) or waiting on another job (``Reason=Dependency``, or
    ``DependencyNeverSatisfied``). No policy decides for it until that clears: planned as a job
    that may start now it takes GPUs in the plan that it cannot use, and a pin or size given it
    binds it when it is freed, perhaps hours later (seen on 24.11: GreenFlow planned a held job
    and one waiting for another's end as starting now on 2 GPUs, both pinned to node3). The
    first tick after the block clears decides it; until then it keeps its start (job_submit.lua's
    deadline, or an earlier decision's)."""
    return job.held or job.state_reason.startswith("Dependency")


def not_yet(options: GreenOptions, now: float) -> bool:
    """Whether the job's user asked it to start later than ``now`` (``--begin``): until then no
    policy decides for it (job_submit.lua deferred it to its deadline, counted from that begin)."""
    return options.earliest is not None and options.earliest > now


def deadline_of(job: Job, options: GreenOptions) -> float:
    """The latest start the job was promised: submit time plus its maximum delay."""
    if options.deadline is not None:
        return options.deadline
    return job.submit_time + options.max_delay_s


def asked_runtime_s(job: Job, options: GreenOptions, partition_limits: Mapping[str, float | None],
                    default_s: float) -> float:
    """The job's runtime as asked (its requested GPUs at full power), as far as Slurm knows it:
    ``limit_as_submitted``, else its limit now, else ``default_s``."""
    return limit_as_submitted(job, options, partition_limits) or job.time_limit_s or default_s


def released_as_started(job: Job, now: float, reason: str) -> JobDecision:
    """The decision that hands a managed pending job back to Slurm: start now, at full power
    and on any node. What an earlier tick enacted is undone, or it would outlive the decision:
    a signed cap (replaced by ``NO_CAP``; the Prolog would still apply it) and a node list
    (cleared: its node may have died since, and the job would wait for it). The fallbacks
    decide it: a policy without a carbon forecast, and a paused controller."""
    return JobDecision(job.job_id, start_at=now, power_cap_fraction=NO_CAP if find_token(job.comment) else None,
                       nodes=() if job.nodes else None, reason=reason)
