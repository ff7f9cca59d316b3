from slurm_green.controller.planner import START_TOLERANCE_S, plan_actions
from slurm_green.core import decision_token as dt
from slurm_green.core.actions import SetDecision, SetGpuFreq, SetGpus, SetNodes, SetStartTime
from slurm_green.core.cluster import ClusterSnapshot, Job, JobState
from slurm_green.core.plan import JobDecision, Plan

KEY = b"s" * 32
NOW = 1_700_000_000.0


def sign(job_id, payload):
    return dt.sign(KEY, job_id, payload)


def verify(job_id, token):
    return dt.verify(KEY, job_id, token)


def snapshot(*jobs):
    return ClusterSnapshot(taken_at=NOW, jobs=jobs)


def test_deferral_comes_after_token_and_gpu_change():
    job = Job(7, gpus_per_node=2, comment="green:flex=6h", eligible_time=NOW + 6 * 3600)
    plan = Plan((JobDecision(7, start_at=NOW + 3600, gpus_per_node=4, power_cap_fraction=0.7),))
    actions = plan_actions(snapshot(job), plan, NOW, sign, verify)
    assert [type(a) for a in actions] == [SetDecision, SetGpus, SetStartTime]
    assert actions[2] == SetStartTime(7, NOW + 3600)
    # the bare token: the backend writes it beside the user's words (commands.plan)
    assert dt.verify(KEY, 7, actions[0].token) == {"cap": 0.7}


def test_decision_already_in_force_gives_no_action():
    token = sign(7, {"cap": 0.7})
    job = Job(7, gpus_per_node=4, comment=f"green:flex=6h {token}", eligible_time=NOW + 3600 + START_TOLERANCE_S / 2)
    plan = Plan((JobDecision(7, start_at=NOW + 3600, gpus_per_node=4, power_cap_fraction=0.7),))
    assert plan_actions(snapshot(job), plan, NOW, sign, verify) == []


def test_forged_token_is_replaced():
    forged = dt.sign(b"f" * 32, 7, {"cap": 1.0})
    job = Job(7, comment=forged, eligible_time=NOW)
    plan = Plan((JobDecision(7, start_at=NOW, power_cap_fraction=0.6),))
    (action,) = plan_actions(snapshot(job), plan, NOW, sign, verify)
    assert isinstance(action, SetDecision)
    assert dt.verify(KEY, 7, action.token) == {"cap": 0.6}


def test_release_now_of_a_deferred_job():
    job = Job(3, eligible_time=NOW + 7200)
    (action,) = plan_actions(snapshot(job), Plan((JobDecision(3, start_at=None),)), NOW)
    assert action == SetStartTime(3, NOW)


def test_past_start_is_clamped_to_now_and_eligible_job_left_alone():
    job = Job(3, eligible_time=NOW - 10)
    assert plan_actions(snapshot(job), Plan((JobDecision(3, start_at=NOW - 500),)), NOW) == []


def test_jobs_no_longer_pending_or_gone_are_skipped():
    running = Job(1, state=JobState.RUNNING, eligible_time=NOW)
    plan = Plan((JobDecision(1, start_at=NOW + 3600), JobDecision(99, start_at=NOW + 3600)))
    assert plan_actions(snapshot(running), plan, NOW) == []


def test_placement_and_node_count():
    job = Job(5, gpus_per_node=4, num_nodes=1, eligible_time=NOW)
    plan = Plan((JobDecision(5, num_nodes=2, nodes=("node1", "node2")),))
    actions = plan_actions(snapshot(job), plan, NOW)
    assert actions == [SetGpus(5, 4, 2), SetNodes(5, ("node1", "node2"))]


def test_no_token_without_a_signer():
    job = Job(5, eligible_time=NOW)
    assert plan_actions(snapshot(job), Plan((JobDecision(5, power_cap_fraction=0.5),)), NOW) == []


def test_gpu_freq_sites_get_the_cap_as_tres_freq_and_no_cap_in_the_token():
    job = Job(7, gpus_per_node=1, comment="green:flex=6h", eligible_time=NOW)
    plan = Plan((JobDecision(7, start_at=NOW, power_cap_fraction=0.7, share_with=3),))
    actions = plan_actions(snapshot(job), plan, NOW, sign, verify, enact="gpu_freq")
    assert [type(a) for a in actions] == [SetDecision, SetGpuFreq]
    assert dt.verify(KEY, 7, actions[0].token) == {"share": 3}
    assert actions[1] == SetGpuFreq(7, "gpu:medium")
    in_force = Job(7, gpus_per_node=1, comment=f"green:flex=6h {actions[0].token}", eligible_time=NOW,
                   tres_freq="gpu:medium")
    assert plan_actions(snapshot(in_force), plan, NOW, sign, verify, enact="gpu_freq") == []


def test_greenflows_resize_pin_and_release_of_an_elastic_job():
    job = Job(5, gpus_per_node=1, num_nodes=1, eligible_time=NOW + 1200)  # held to its deadline by the plugin
    plan = Plan((JobDecision(5, start_at=NOW, gpus_per_node=4, num_nodes=2, nodes=("node2", "node1")),))
    assert plan_actions(snapshot(job), plan, NOW) == [SetGpus(5, 4, 2), SetNodes(5, ("node2", "node1")),
                                                      SetStartTime(5, NOW)]


def test_a_pin_in_force_is_not_sent_again_whatever_the_order():
    job = Job(5, gpus_per_node=4, num_nodes=2, nodes=("node1", "node2"), eligible_time=NOW)
    plan = Plan((JobDecision(5, start_at=NOW, gpus_per_node=4, num_nodes=2, nodes=("node2", "node1")),))
    assert plan_actions(snapshot(job), plan, NOW) == []


def test_a_node_list_always_travels_with_its_node_count():
    """Slurm keeps ReqNodeList=node1,node2 beside NumNodes=1: a job that cannot start as decided."""
    job = Job(5, gpus_per_node=2, num_nodes=1, eligible_time=NOW)
    plan = Plan((JobDecision(5, nodes=("node1", "node2")),))
    assert plan_actions(snapshot(job), plan, NOW) == [SetGpus(5, 2, 2), SetNodes(5, ("node1", "node2"))]


def test_an_empty_node_list_clears_a_pin_and_none_leaves_it():
    pinned = Job(5, gpus_per_node=2, nodes=("node3",), eligible_time=NOW)
    assert plan_actions(snapshot(pinned), Plan((JobDecision(5, nodes=()),)), NOW) == [SetNodes(5, ())]
    assert plan_actions(snapshot(pinned), Plan((JobDecision(5),)), NOW) == []
    free = Job(6, gpus_per_node=2, eligible_time=NOW)
    assert plan_actions(snapshot(free), Plan((JobDecision(6, nodes=()),)), NOW) == []
