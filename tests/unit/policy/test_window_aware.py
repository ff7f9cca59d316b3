"""The capacity-aware window baseline on literal clusters and forecasts."""

from dataclasses import replace

import numpy as np
import pytest
from policy_literals import HOUR, NOW, context, nodes, pending, signal, snapshot

from slurm_green.core.cluster import Job, JobState
from slurm_green.core.plan import Plan
from slurm_green.policy.window import WindowPolicy
from slurm_green.policy.window_aware import CapacityAwareWindowPolicy

#: 400 g/kWh but for a 3-hour dip to 100 from 06:00.
DIP = [400] * 6 + [100] * 3 + [400] * 39
AWARE = CapacityAwareWindowPolicy(cap_fraction=None)
BLIND = WindowPolicy(cap_fraction=None)


def gpus_per_hour(plan: Plan, gpus: dict[int, int], hours: int = 48) -> np.ndarray:
    """GPU-hours the plan puts into each hour from NOW (by each decision's start and runtime)."""
    begins = NOW + HOUR * np.arange(hours)
    out = np.zeros(hours)
    for d in plan.decisions:
        end = d.start_at + d.expected_runtime_s
        out += gpus[d.job_id] * np.clip(np.minimum(end, begins + HOUR) - np.maximum(d.start_at, begins), 0, None) / HOUR
    return out


def test_it_does_not_stack_more_gpu_time_into_the_clean_window_than_the_cluster_has(models):
    jobs = [pending(i, gpus=4, runtime_h=3, flex_h=24) for i in range(1, 5)]
    snap = snapshot(jobs, nodes(1, 8))
    sizes = {job.job_id: 4 for job in jobs}
    assert gpus_per_hour(BLIND(context(snap, signal(DIP), models, NOW)), sizes).max() == 16  # all four in the dip
    plan = AWARE(context(snap, signal(DIP), models, NOW))
    assert gpus_per_hour(plan, sizes).max() <= 8
    assert [d.start_at for d in plan.decisions] == [NOW + 6 * HOUR] * 2 + [NOW] * 2
    assert "cleaner starts are full" in plan.decisions[2].reason


def running(job_id: int, gpus: int, started_h: float, limit_h: float) -> Job:
    return Job(job_id, state=JobState.RUNNING, submit_time=NOW + started_h * HOUR, start_time=NOW + started_h * HOUR,
               time_limit_s=limit_h * HOUR, gpus_per_node=gpus, nodes=("n0",))


@pytest.mark.parametrize("holder", [
    running(9, 8, started_h=-1, limit_h=8),  # ends at 07:00
    replace(running(9, 8, started_h=0, limit_h=7), state=JobState.PENDING, start_time=None),  # unmanaged: starts now
])
def test_gpu_time_already_committed_keeps_a_job_out_of_the_window_it_fills(models, holder):
    plan = AWARE(context(snapshot([holder, pending(1, gpus=8, runtime_h=3, flex_h=24)], nodes(1, 8)), signal(DIP), models, NOW))
    (decision,) = plan.decisions
    assert decision.start_at == NOW + 7 * HOUR  # the dip's last two hours, the first start with room


def test_it_never_defers_past_the_deadline_and_releases_now_when_nothing_has_room(models):
    jobs = [pending(i, gpus=g, runtime_h=r, flex_h=f)
            for i, (g, r, f) in enumerate([(8, 3, 2), (4, 1, 5), (2, 6, 30), (8, 2, 8), (1, 1, 0.5)], start=1)]
    plan = AWARE(context(snapshot([running(9, 8, -1, 4), *jobs], nodes(1, 8)), signal(DIP), models, NOW))
    deadlines = {job.job_id: job.submit_time + f * HOUR for job, f in zip(jobs, (2, 5, 30, 8, 0.5))}
    assert all(NOW <= d.start_at <= deadlines[d.job_id] for d in plan.decisions)
    full = plan.decisions[4]  # 1 GPU for 1 h within 30 min: the running job holds every GPU until 03:00
    assert full.start_at == NOW and "no start cleaner than now has room: released now" in full.reason


def test_the_earliest_deadline_gets_the_clean_window_first(models):
    late, early = pending(1, gpus=8, runtime_h=3, flex_h=24), pending(2, gpus=8, runtime_h=3, flex_h=8, submit=NOW + 1)
    first, second = AWARE(context(snapshot([late, early], nodes(1, 8)), signal(DIP), models, NOW)).decisions
    assert (first.job_id, second.job_id) == (1, 2)  # decisions keep the snapshot's order
    assert second.start_at == NOW + 6 * HOUR and first.start_at != NOW + 6 * HOUR


def test_on_an_empty_big_cluster_it_decides_exactly_as_the_blind_window(models):
    jobs = [pending(i, gpus=g, runtime_h=r, flex_h=f, cap=c)
            for i, (g, r, f, c) in enumerate([(8, 3, 24, True), (4, 1, 5, False), (16, 6, 30, True), (1, 1, 0.5, True)],
                                             start=1)]
    snap = snapshot(jobs, nodes(64, 8))
    for aware, blind in ((CapacityAwareWindowPolicy(), WindowPolicy()), (AWARE, BLIND)):
        assert aware(context(snap, signal(DIP), models, NOW)) == blind(context(snap, signal(DIP), models, NOW))
        assert aware(context(snap, None, models, NOW)) == blind(context(snap, None, models, NOW))


def test_a_full_cluster_does_not_defer_a_job_to_a_start_no_cleaner_than_now(models):
    # every GPU is held until 03:00 and carbon is flat: waiting for room buys nothing, so Slurm queues it now
    plan = AWARE(context(snapshot([running(9, 8, -1, 4), pending(1, gpus=8, runtime_h=3, flex_h=24)], nodes(1, 8)),
                 signal([400] * 48), models, NOW))
    assert plan.decisions[0].start_at == NOW


def test_each_gpu_type_fills_only_its_own_nodes(models):
    typed = (replace(nodes(1, 8)[0], name="h0", gpu_type="h100"), replace(nodes(1, 8)[0], name="a0", gpu_type="a40"))
    holder = replace(running(9, 8, started_h=-1, limit_h=8), nodes=("h0",), gpu_type="h100")  # h0 full until 07:00
    jobs = [replace(pending(i, gpus=8, runtime_h=3, flex_h=24), gpu_type=t) for i, t in ((1, "h100"), (2, "a40"))]
    on_h100, on_a40 = AWARE(context(snapshot([holder, *jobs], typed), signal(DIP), models, NOW)).decisions
    assert (on_h100.start_at, on_a40.start_at) == (NOW + 7 * HOUR, NOW + 6 * HOUR)


def test_a_job_released_into_a_queue_holds_gpu_time_where_it_will_run_not_now(models):
    # every GPU is held until 03:00; job 1 (deadline in 30 min) has no room and is released now: it will run
    # 03:00-07:00, so job 2 cannot have the dip from 06:00 and takes 07:00, the next start with room cleaner than now
    queued, flexible = pending(1, gpus=8, runtime_h=4, flex_h=0.5), pending(2, gpus=8, runtime_h=3, flex_h=24)
    first, second = AWARE(context(snapshot([running(9, 8, -1, 4), queued, flexible], nodes(1, 8)), signal(DIP), models,
                          NOW)).decisions
    assert first.start_at == NOW and "released now" in first.reason
    assert second.start_at == NOW + 7 * HOUR
