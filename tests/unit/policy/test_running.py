"""GrowRunning: a running elastic job grows into idle GPUs only when nobody waits and it pays."""

from __future__ import annotations

from dataclasses import replace

from policy_literals import HOUR, NOW, context, nodes, pending, snapshot

from slurm_green.core.cluster import JobState
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.core.plan import JobDecision, Plan
from slurm_green.policy.running import GrowRunning


def running(job_id: int = 1, gpus: int = 1, high: int = 4, elastic: bool = True, left_h: float = 10.0,
            node: str = "n0"):
    options = GreenOptions(gpus_min=1, gpus_max=high, elastic=elastic)
    return replace(pending(job_id), state=JobState.RUNNING, gpus_per_node=gpus, nodes=(node,),
                   start_time=NOW - HOUR, time_limit_s=(left_h + 1) * HOUR, admin_comment=format_marker(options))


class Nothing:
    """The wrapped policy: decides nothing (its pending decisions are not what is tested)."""

    name = "nothing"

    def __call__(self, context) -> Plan:
        return Plan()


def decide(jobs, used=None, slack: float = 0.2, models=None):
    snap = snapshot(jobs, nodes(2, gpus=4, used=used or {0: (0,)}))
    return GrowRunning(Nothing(), restart_cost_s=600, energy_slack=slack)(context(snap, None, models))


def test_a_running_elastic_job_grows_into_its_nodes_idle_gpus(models) -> None:
    [decision] = decide([running()], models=models).decisions
    assert (decision.job_id, decision.gpus_per_node, decision.num_nodes) == (1, 2, 1)
    # g^0.8 scaling: 2 GPUs use 2^0.2 = 1.15 x the energy (within 0.2), 3 GPUs 1.25 x (not)
    assert decision.expected_runtime_s == 10 * HOUR / 2 ** 0.8
    assert "1 -> 2 GPUs" in decision.reason


def test_no_growth_beyond_the_energy_bound_the_users_range_or_the_nodes_free_gpus(models) -> None:
    assert decide([running()], slack=0.1, models=models).decisions == ()
    assert decide([running(high=1)], models=models).decisions == ()
    assert decide([running()], used={0: (0, 1, 2, 3)}, models=models).decisions == ()  # its node is full


def test_a_job_that_did_not_opt_in_or_is_near_its_end_is_not_touched(models) -> None:
    assert decide([running(elastic=False)], models=models).decisions == ()
    assert decide([running(left_h=0.3)], models=models).decisions == ()      # the restart would not pay


def test_nothing_grows_while_any_job_is_pending(models) -> None:
    deferred = replace(pending(2), eligible_time=NOW + 6 * HOUR)
    held = replace(pending(3), held=True)
    for waiting in (pending(2), deferred, held):
        assert decide([running(), waiting], models=models).decisions == ()


def test_the_wrapped_policys_decisions_stay_and_its_name_and_budget_show(models) -> None:
    class Decides(Nothing):
        name = "greenflow"
        budget_fraction = 0.8

        def __call__(self, context) -> Plan:
            return Plan(decisions=(JobDecision(9, start_at=NOW),))

    snap = snapshot([running()], nodes(2, gpus=4, used={0: (0,)}))
    policy = GrowRunning(Decides(), restart_cost_s=600, energy_slack=0.2)
    plan = policy(context(snap, None, models))
    assert [d.job_id for d in plan.decisions] == [9, 1]
    assert (policy.name, policy.budget_fraction) == ("greenflow", 0.8)
