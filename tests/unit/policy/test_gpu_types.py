import dataclasses

from slurm_green.core.cluster import ClusterSnapshot, Job, Node
from slurm_green.policy.gpu_types import cluster_gpu_types, job_gpu_types


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
    assert job_gpu_types(snapshot, jobs) == ("h100", "a40", "h100", "a40")  # 8 a40 vs 8 h100: tie by name
    assert cluster_gpu_types(snapshot).by_partition["all"] == "a40"


def test_majority_counts_gpus_not_nodes_and_untyped_nodes_give_none():
    typed = (Node("big", gpus_total=8, gpu_type="h100"), Node("s0", gpus_total=2, gpu_type="a40"),
             Node("s1", gpus_total=2, gpu_type="a40"), Node("cpu", gpus_total=0, gpu_type="zz"))
    assert cluster_gpu_types(_snapshot(typed)).majority == "h100"
    assert cluster_gpu_types(_snapshot((Node("n", gpus_total=4),))).majority is None
    assert cluster_gpu_types(_snapshot(())).majority is None
