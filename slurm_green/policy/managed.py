"""Which pending jobs a policy may touch, with the options job_submit.lua recorded for them."""

from __future__ import annotations

from collections.abc import Iterator

from slurm_green.core.cluster import ClusterSnapshot, Job
from slurm_green.core.green_options import GreenOptions, parse_marker


def managed_pending(snapshot: ClusterSnapshot) -> Iterator[tuple[Job, GreenOptions]]:
    """Pending jobs whose trusted marker says they are managed.

    Only the AdminComment marker counts: users cannot write it, so a user cannot
    bring another job, or their own beyond the site's limits, under a policy.
    """
    for job in snapshot.jobs:
        if not job.is_pending:
            continue
        options = parse_marker(job.admin_comment)
        if options is not None and options.managed:
            yield job, options


def deadline_of(job: Job, options: GreenOptions) -> float:
    """The latest start the job was promised: submit time plus its maximum delay."""
    if options.deadline is not None:
        return options.deadline
    return job.submit_time + options.max_delay_s


def asked_runtime_s(job: Job, options: GreenOptions, default_s: float) -> float:
    """The job's runtime as asked (its requested GPUs at full power), as far as Slurm knows it:
    the limit it was submitted with, which the marker keeps, else its limit now, else ``default_s``.

    Not the limit now when the marker has one: the controller raises the limit of a job its
    decision slows (``SetTimeLimit``), and read back as the job's work that raised limit would
    make the next decision slower still, and the limit with it, tick after tick."""
    return options.time_limit_s or job.time_limit_s or default_s
