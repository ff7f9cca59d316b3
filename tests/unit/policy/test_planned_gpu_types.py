import dataclasses

from slurm_green.core.cluster import ClusterSnapshot, Job, JobState, Node
from slurm_green.core.decision import DecisionMemo
from slurm_green.policy.gpu_types import cluster_gpu_types, gpu_pools, job_gpu_types, running_gpu_type


def _snapshot(nodes: tuple[Node, ...], jobs: tuple[Job, ...] = ()) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=0.0, jobs=jobs, nodes=nodes)


def test_a_job_is_planned_on_its_request_else_its_partition_else_the_cluster_majority():
    nodes = (Node("h0", gpus_total=4, gpu_type="h100", partitions=("fast",)),
             Node("a0", gpus_total=4, gpu_type="a40", partitions=("slow", "all")),
             Node("a1", gpus_total=4, gpu_type="a40", partitions=("slow", "all")),
             Node("h1", gpus_total=4, gpu_type="h100", partitions=("all",)))
    job = Job(1, partition="fast")
    jobs = (job, dataclasses.replace(job, job_id=2, partition="slow"),
            dataclasses.replace(job, job_id=3, partition="slow", gpu_type="h100"),
            dataclasses.replace(job, job_id=4, partition="nowhere"))
    snapshot = _snapshot(nodes, jobs)
    # 8 a40 vs 8 h100: a tie, by name
    assert job_gpu_types(snapshot, jobs, DecisionMemo()) == ("h100", "a40", "h100", "a40")
    assert cluster_gpu_types(snapshot, DecisionMemo()).by_partition["all"] == "a40"


def test_majority_counts_gpus_not_nodes_and_untyped_nodes_give_none():
    typed = (Node("big", gpus_total=8, gpu_type="h100"), Node("s0", gpus_total=2, gpu_type="a40"),
             Node("s1", gpus_total=2, gpu_type="a40"), Node("cpu", gpus_total=0, gpu_type="zz"))
    assert cluster_gpu_types(_snapshot(typed), DecisionMemo()).majority == "h100"
    assert cluster_gpu_types(_snapshot((Node("n", gpus_total=4),)), DecisionMemo()).majority is None
    assert cluster_gpu_types(_snapshot(()), DecisionMemo()).majority is None


def test_pools_split_a_mixed_cluster_by_type_and_one_type_is_the_snapshot_itself():
    nodes = (Node("h0", gpus_total=4, gpu_type="h100"), Node("a0", gpus_total=4, gpu_type="a40"),
             Node("a1", gpus_total=4, gpu_type="a40"))
    jobs = (Job(1, gpu_type="h100"), Job(2, gpu_type="a40"), Job(3),  # 3: the majority, a40
            Job(4, state=JobState.RUNNING, nodes=("h0",)), Job(5, gpu_type="v100"))  # 5: no v100 node
    pools = dict(gpu_pools(_snapshot(nodes, jobs), DecisionMemo()))
    assert {j.job_id for j in pools["h100"].jobs} == {1, 4}
    assert {j.job_id for j in pools["a40"].jobs} == {2, 3, 5}
    assert [n.name for n in pools["a40"].nodes] == ["a0", "a1"]
    single = _snapshot(nodes[1:], jobs)
    assert gpu_pools(single, DecisionMemo()) == [("a40", single)]
    assert gpu_pools(single, DecisionMemo())[0][1] is single


def test_a_running_job_runs_on_its_requested_type_else_its_nodes():
    nodes = (Node("a", gpus_total=4, gpu_type="h100"), Node("b", gpus_total=4, gpu_type="a40"), Node("c", gpus_total=4))
    snap = _snapshot(nodes)
    untyped = Job(1, state=JobState.RUNNING, gpus_per_node=1, nodes=("b",))
    assert running_gpu_type(untyped, snap) == "a40"
    assert running_gpu_type(dataclasses.replace(untyped, gpu_type="h100"), snap) == "h100"
    assert running_gpu_type(dataclasses.replace(untyped, nodes=("c",)), snap) is None
    assert running_gpu_type(dataclasses.replace(untyped, nodes=()), snap) is None
