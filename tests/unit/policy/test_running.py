"""GrowRunning: a running elastic job grows into idle GPUs only when nobody waits and it pays;
ShrinkRunning: one gives GPUs to the blocked head of the queue when that pays twice over;
ShrinkWhenDear: one shrinks when the budget's price makes its carbon (energy) dear."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy_literals import HOUR, NOW, context, nodes, pending, signal, snapshot

from slurm_green.core.cluster import JobState
from slurm_green.core.green_options import GreenOptions, format_marker
from slurm_green.core.plan import JobDecision, Plan, Price
from slurm_green.core.progress import JobProgress, MeasuredRate
from slurm_green.models.freezing import DEFAULT_PENALTY, params_for
from slurm_green.policy.running import GrowRunning, ShrinkRunning, ShrinkWhenDear, resizing


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


def decide(jobs, used=None, slack: float = 0.2, models=None, reports=(), measured=None):
    snap = snapshot(jobs, nodes(2, gpus=4, used=used or {0: (0,)}))
    ctx = replace(context(snap, None, models), progress={r.job_id: r for r in reports}, measured=measured or {})
    return GrowRunning(Nothing(), restart_cost_s=600, energy_slack=slack)(ctx)


def report(job_id: int = 1, left_h: float | None = None, total: float = 0.0) -> JobProgress:
    """Job ``job_id``'s own report, made a minute ago: ``left_h`` hours to go at 10 units/s."""
    per_s = 10.0
    if left_h is not None:
        total = 10_000_000.0
    done = total - (left_h or 0.0) * HOUR * per_s
    return JobProgress(job_id, "samples", done, per_s, 0.0, NOW - 60, total=total)


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
    # its GPUs asked per job or task (--gpus, --gpus-per-task): a Gres= update cannot resize it
    assert decide([replace(running(), gpus_per_node_only=False)], models=models).decisions == ()


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


def test_a_job_its_reports_measured_scaling_worse_than_modelled_is_not_grown(models) -> None:
    """Run at 1 and 2 GPUs (resized before), it went x1.1 faster on 2, not the model's x1.74: two
    GPUs would not pay. Reports claiming better scaling, or another job's, change nothing."""
    worse = {1: (MeasuredRate(1, "samples", 0.0, 100.0, 4), MeasuredRate(2, "samples", 0.0, 110.0, 4))}
    assert decide([running()], models=models, measured=worse).decisions == ()
    better = {1: (MeasuredRate(1, "samples", 0.0, 100.0, 4), MeasuredRate(2, "samples", 0.0, 400.0, 4))}
    as_modelled = decide([running()], models=models).decisions
    assert decide([running()], models=models, measured=better).decisions == as_modelled
    assert decide([running()], models=models, measured={2: worse[1]}).decisions == as_modelled


# ---- ShrinkRunning: a running elastic job gives GPUs to the job at the head of the queue ----

def shrink(jobs, node_count: int = 1, used=None, plan: Plan = Plan(), models=None, measured=None):
    class Planned(Nothing):
        def __call__(self, context) -> Plan:
            return plan

    snap = snapshot(jobs, nodes(node_count, gpus=4, used=used if used is not None else {0: (0, 1, 2, 3)}))
    ctx = replace(context(snap, None, models), measured=measured or {})
    return ShrinkRunning(Planned(), restart_cost_s=600, min_ratio=2.0)(ctx)


def eligible(job_id: int = 2, gpus: int = 1):
    return replace(pending(job_id, gpus=gpus), eligible_time=NOW - 60, submit_time=NOW - 60)


def test_a_long_running_elastic_job_shrinks_just_enough_for_the_blocked_head_of_the_queue(models) -> None:
    [decision] = shrink([running(gpus=4), eligible(gpus=1)], models=models).decisions
    assert (decision.job_id, decision.gpus_per_node, decision.num_nodes) == (1, 3, 1)
    # 10 h left at 4 GPUs is 10 x (4/3)^0.8 h at 3; the queued job would wait the 10 h
    assert decision.expected_runtime_s == pytest.approx(10 * HOUR * (4 / 3) ** 0.8)
    assert "4 -> 3 GPUs so job 2 starts" in decision.reason


def test_a_job_measured_to_scale_worse_loses_less_by_a_shrink_and_says_why(models) -> None:
    """At 2 and 4 GPUs it ran x1.1 apart (x1.74 modelled): the factor 1.1/1.74 at 4 GPUs, half
    way back to 1 at 3, so giving up a GPU costs it less than the model alone says."""
    measured = {1: (MeasuredRate(2, "samples", 0.0, 100.0, 4), MeasuredRate(4, "samples", 0.0, 110.0, 4))}
    [decision] = shrink([running(gpus=4), eligible(gpus=1)], models=models, measured=measured).decisions
    at_four = 1.1 / 2 ** 0.8
    at_three = 1 + (at_four - 1) / 2
    assert decision.expected_runtime_s == pytest.approx(10 * HOUR * (4 ** 0.8 * at_four) / (3 ** 0.8 * at_three))
    assert decision.expected_runtime_s < 10 * HOUR * (4 / 3) ** 0.8
    assert "as measured" in decision.reason


def test_no_shrink_when_the_head_would_not_wait_long_enough(models) -> None:
    # a second node frees its GPUs in 1 h: the head waits 1 h, not worth 2.6 h more of job 1
    other = replace(running(job_id=3, gpus=4, elastic=False, left_h=1.0, node="n1"))
    assert shrink([running(gpus=4), other, eligible()], node_count=2,
                  used={0: (0, 1, 2, 3), 1: (0, 1, 2, 3)}, models=models).decisions == ()


def test_no_shrink_below_the_users_minimum_or_for_a_job_that_did_not_opt_in(models) -> None:
    assert shrink([running(gpus=4), eligible(gpus=4)], models=models).decisions == ()   # would keep 0
    at_minimum = replace(running(gpus=4), admin_comment=format_marker(
        GreenOptions(gpus_min=4, gpus_max=4, elastic=True)))
    assert shrink([at_minimum, eligible()], models=models).decisions == ()
    assert shrink([running(gpus=4, elastic=False), eligible()], models=models).decisions == ()


def test_only_a_head_that_wants_to_start_now_fits_nowhere_and_needs_one_node_counts(models) -> None:
    deferred = replace(pending(2), eligible_time=NOW + 6 * HOUR)
    held = replace(eligible(), held=True)
    for head in (deferred, held, eligible(gpus=8)):  # deferred, held, spanning two nodes
        assert shrink([running(gpus=4), head], models=models).decisions == ()
    assert shrink([running(gpus=4), eligible()], used={0: (0, 1, 2)}, models=models).decisions == ()  # fits now
    # 2 GPUs, which a shrink 4 -> 2 would not pay for; a deferred job the plan starts now on 1
    assert shrink([running(gpus=4), replace(eligible(), gpus_per_node=2)], models=models).decisions == ()
    asked_two = replace(deferred, gpus_per_node=2)
    started_now = Plan(decisions=(JobDecision(2, start_at=NOW, gpus_per_node=1, num_nodes=1),))
    [decision] = shrink([running(gpus=4), asked_two], plan=started_now, models=models).decisions[1:]
    assert decision.gpus_per_node == 3



def test_a_jobs_own_report_can_only_shorten_its_time_left(models) -> None:
    """Slurm says 10 h left; the job says 0.5 h: too close to its end for a restart. A report
    saying more than the limit, or knowing no total, changes nothing."""
    assert decide([running()], models=models, reports=[report(left_h=0.5)]).decisions == ()
    for said in (report(left_h=50), report(total=0.0), report(job_id=2, left_h=0.5)):
        [decision] = decide([running()], models=models, reports=[said]).decisions
        assert decision.expected_runtime_s == 10 * HOUR / 2 ** 0.8
    [decision] = decide([running()], models=models, reports=[report(left_h=3)]).decisions
    assert decision.expected_runtime_s == pytest.approx((3 * HOUR - 60) / 2 ** 0.8)


def test_the_queued_jobs_wait_is_never_read_from_another_users_report(models) -> None:
    """Job 1 says it ends within minutes: its own loss is small, so it is shrunk; the queued
    job's wait stays what the time limits say (a report cannot talk a shrink away)."""
    snap = snapshot([running(gpus=4), eligible()], nodes(1, gpus=4, used={0: (0, 1, 2, 3)}))
    ctx = replace(context(snap, None, models), progress={1: report(left_h=0.1)})
    [decision] = ShrinkRunning(Nothing(), restart_cost_s=600)(ctx).decisions
    assert decision.expected_runtime_s == pytest.approx((0.1 * HOUR - 60) * (4 / 3) ** 0.8)
    assert "would wait about 10.0 h" in decision.reason


def frozen_report(job_id: int, frozen: float) -> JobProgress:
    """A report that says nothing of the time left (no total), only the frozen share."""
    return JobProgress(job_id, "samples", 1000.0, 10.0, frozen, NOW - 60)


def _frozen_rate(gpus: int, frozen: float, skip: float) -> float:
    """The literal models' g**0.8, sped up where compute is (g**-0.2 of a step), penalised."""
    compute = gpus ** 0.8 / gpus
    return gpus ** 0.8 / (1 - skip * frozen * compute) * (1 - DEFAULT_PENALTY * frozen)


def test_a_frozen_job_is_rated_by_its_effective_progress_when_it_grows(models) -> None:
    skip = params_for(models.for_job("literal").job_type).skip
    [unfrozen] = decide([running()], models=models).decisions
    assert unfrozen.gpus_per_node == 2  # energy x1.15 for the second GPU: within the 20 % bound
    # frozen, the second GPU speeds up less of each step: x1.21 the energy, over the bound
    assert decide([running()], models=models, reports=[frozen_report(1, 0.5)]).decisions == ()
    # with a looser bound it grows, but less far than the same job unfrozen
    [frozen] = decide([running()], models=models, slack=0.25, reports=[frozen_report(1, 0.5)]).decisions
    [unfrozen] = decide([running()], models=models, slack=0.25).decisions
    assert (frozen.gpus_per_node, unfrozen.gpus_per_node) == (2, 3)
    assert "rated with 50% of its blocks frozen (its report)" in frozen.reason and "frozen" not in unfrozen.reason
    assert frozen.expected_runtime_s == pytest.approx(10 * HOUR * _frozen_rate(1, 0.5, skip) / _frozen_rate(2, 0.5, skip))


def test_of_two_jobs_that_could_give_gpus_to_the_head_the_frozen_one_is_shrunk(models) -> None:
    """Both run 4 GPUs with 10 h left on their own nodes; the head needs one GPU. Shrinking
    either pays; the one whose helper reports half its blocks frozen loses less."""
    jobs = [running(1, gpus=4), running(3, gpus=4, node="n1"), eligible()]
    snap = snapshot(jobs, nodes(2, gpus=4, used={0: (0, 1, 2, 3), 1: (0, 1, 2, 3)}))
    for frozen_job in (1, 3):
        ctx = replace(context(snap, None, models), progress={frozen_job: frozen_report(frozen_job, 0.5)})
        [decision] = ShrinkRunning(Nothing(), restart_cost_s=600)(ctx).decisions
        assert decision.job_id == frozen_job and decision.gpus_per_node == 3
        skip = params_for(models.for_job("literal").job_type).skip
        assert decision.expected_runtime_s == pytest.approx(
            10 * HOUR * _frozen_rate(4, 0.5, skip) / _frozen_rate(3, 0.5, skip))


# ---- ShrinkWhenDear: the budget's price makes a running job's carbon worth a shrink ----

#: The wrapped plan holds a pending job back for carbon: GPUs a shrink frees stay free.
DEFERRED = JobDecision(9, start_at=NOW + 3 * HOUR)


def dear(jobs, price: Price | None, values=None, plan_decisions=(DEFERRED,), models=None, pools=None,
         node_type: str | None = None):
    """What ShrinkWhenDear adds; the wrapped plan's prices are ``price`` for one pool, or ``pools``
    ((GPU type, price) per pool), and the one node's GPUs are of ``node_type``."""
    class Priced(Nothing):
        def __call__(self, context) -> Plan:
            prices = pools if pools is not None else () if price is None else ((None, price),)
            return Plan(decisions=tuple(plan_decisions), prices=prices)

    snap = snapshot(jobs, tuple(replace(n, gpu_type=node_type) for n in nodes(1, gpus=4, used={0: (0, 1, 2, 3)})))
    forecast = None if values is None else signal(values)
    plan = ShrinkWhenDear(Priced(), restart_cost_s=600, min_gain=0.1)(context(snap, forecast, models))
    assert plan.decisions[:len(plan_decisions)] == tuple(plan_decisions)  # the wrapped plan's stay
    return Plan(decisions=plan.decisions[len(plan_decisions):])  # what it added


def elastic(low: int = 1, job_id: int = 1):
    return replace(running(job_id, gpus=4), admin_comment=format_marker(
        GreenOptions(gpus_min=low, gpus_max=4, elastic=True)))


#: 1e5 s (27.8 h) of JCT per kg: at 500 g/kWh a 4-GPU job with 10 h left (10 kWh at 1 kW)
#: saves 0.65 kg on 2 GPUs (8.71 kWh over 17.4 h), worth 18.0 h, for 7.6 h longer: a gain of 10.4 h.
PRICE = Price(1e5, "carbon")


def test_a_running_elastic_job_shrinks_while_carbon_is_dear_at_the_budgets_price(models) -> None:
    [decision] = dear([elastic(low=2)], PRICE, [500.0] * 72, models=models).decisions
    assert (decision.job_id, decision.gpus_per_node, decision.num_nodes) == (1, 2, 1)
    assert decision.expected_runtime_s == pytest.approx(10 * HOUR * 2 ** 0.8)
    assert "4 -> 2 GPUs while carbon is dear" in decision.reason and "0.647 kg CO2 less" in decision.reason
    # Within the user's range, the count with the largest priced gain (here its minimum, 1:
    # 1.21 kg worth 33.6 h, for 20.5 h longer)
    [lowest] = dear([elastic(low=1)], PRICE, [500.0] * 72, models=models).decisions
    assert lowest.gpus_per_node == 1


def test_no_shrink_when_carbon_is_cheap_over_the_hours_it_would_run(models) -> None:
    assert dear([elastic()], PRICE, [50.0] * 72, models=models).decisions == ()
    # clean for the 10 h it has left, dear after: the shrunk job would run into the dear hours
    assert dear([elastic()], PRICE, [50.0] * 10 + [900.0] * 62, models=models).decisions == ()
    assert dear([elastic()], PRICE, [900.0] * 72, models=models).decisions != ()


def test_no_shrink_without_a_price_a_forecast_or_a_job_that_opted_in(models) -> None:
    assert dear([elastic()], None, [500.0] * 72, models=models).decisions == ()
    assert dear([elastic()], Price(0.0, "carbon"), [500.0] * 72, models=models).decisions == ()
    assert dear([elastic()], PRICE, None, models=models).decisions == ()
    assert dear([running(gpus=4, elastic=False)], PRICE, [500.0] * 72, models=models).decisions == ()
    assert dear([replace(elastic(), time_limit_s=HOUR + 300)], PRICE, [500.0] * 72, models=models).decisions == ()


def test_a_job_that_asked_for_no_gpu_type_is_priced_by_the_pool_of_the_gpus_it_runs_on(models) -> None:
    """On a cluster of two types, the untyped running job on an h100 node takes the h100 price."""
    h100_dear = (("a40", Price(0.0, "carbon")), ("h100", PRICE))
    assert dear([elastic(low=2)], None, [500.0] * 72, models=models, pools=h100_dear, node_type="h100").decisions
    assert dear([elastic(low=2)], None, [500.0] * 72, models=models, pools=h100_dear, node_type="a40").decisions == ()


def test_at_most_one_resize_a_tick(models) -> None:
    grown = JobDecision(3, gpus_per_node=2, num_nodes=1)
    other = replace(running(3, gpus=1), nodes=("n0",))
    assert dear([elastic(), other], PRICE, [500.0] * 72, plan_decisions=(DEFERRED, grown), models=models).decisions == ()
    two = dear([elastic(1), elastic(job_id=2)], PRICE, [500.0] * 72, models=models)
    assert len(two.decisions) == 1


def test_no_shrink_while_the_plan_holds_no_job_back(models) -> None:
    """The queue would take the freed GPUs at the same dear hour: nothing saved."""
    assert dear([elastic()], PRICE, [500.0] * 72, plan_decisions=(), models=models).decisions == ()
    started = JobDecision(9, start_at=NOW)
    assert dear([elastic()], PRICE, [500.0] * 72, plan_decisions=(started,), models=models).decisions == ()


def test_under_an_energy_price_the_hour_does_not_matter(models) -> None:
    # 1e5 s per kWh: 1.29 kWh saved on 2 GPUs is worth 35.9 h for 7.6 h longer
    [decision] = dear([elastic(low=2)], Price(1e5, "energy"), None, models=models).decisions
    assert decision.gpus_per_node == 2 and "kWh less" in decision.reason


def test_resizing_shrinks_for_carbon_only_when_asked() -> None:
    assert isinstance(resizing(Nothing(), when_dear=True), ShrinkWhenDear)
    assert isinstance(resizing(Nothing(), shrink=True, when_dear=True).inner, ShrinkRunning)
    assert not isinstance(resizing(Nothing(), shrink=True), ShrinkWhenDear)


def without_range(job_id: int = 1, node: str = "n0"):
    """Elastic (``green:elastic=requeue``) with no ``gpus=`` range: its own 4 GPUs only."""
    return replace(running(job_id, gpus=4, node=node), admin_comment=format_marker(GreenOptions(elastic=True)))


def test_a_job_that_gave_no_gpu_range_is_never_shrunk_and_the_one_shrink_goes_to_one_that_did(models) -> None:
    assert shrink([without_range(), eligible(gpus=1)], models=models).decisions == ()
    assert dear([without_range()], PRICE, [500.0] * 72, models=models).decisions == ()
    # the one shrink a tick makes goes to job 3 (range 1-4), not to job 1, which the resizer would refuse
    both = [without_range(), running(3, gpus=4, node="n1"), eligible(gpus=1)]
    decided = shrink(both, node_count=2, models=models, used={0: (0, 1, 2, 3), 1: (0, 1, 2, 3)}).decisions
    assert [(d.job_id, d.gpus_per_node) for d in decided] == [(3, 3)]
