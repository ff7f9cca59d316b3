import dataclasses

from slurm_green.core.cluster import ClusterSnapshot, Job, JobState, Node
from slurm_green.core.decision import DecisionMemo
from slurm_green.core.cluster import Partition
from slurm_green.core.models import Config
from slurm_green.models.registry import default_registry
from slurm_green.policy.gpu_types import cluster_gpu_types, gpu_pools, job_gpu_types, planned_types, running_gpu_type

MODELS = default_registry()


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
    pools = dict(gpu_pools(_snapshot(nodes, jobs), DecisionMemo(), MODELS))
    assert {j.job_id for j in pools["h100"].jobs} == {1, 4}
    assert {j.job_id for j in pools["a40"].jobs} == {2, 3, 5}
    assert [n.name for n in pools["a40"].nodes] == ["a0", "a1"]
    single = _snapshot(nodes[1:], jobs)
    assert gpu_pools(single, DecisionMemo(), MODELS) == [("a40", single)]
    assert gpu_pools(single, DecisionMemo(), MODELS)[0][1] is single


def test_a_running_job_runs_on_its_requested_type_else_its_nodes():
    nodes = (Node("a", gpus_total=4, gpu_type="h100"), Node("b", gpus_total=4, gpu_type="a40"), Node("c", gpus_total=4))
    snap = _snapshot(nodes)
    untyped = Job(1, state=JobState.RUNNING, gpus_per_node=1, nodes=("b",))
    assert running_gpu_type(untyped, snap) == "a40"
    assert running_gpu_type(dataclasses.replace(untyped, gpu_type="h100"), snap) == "h100"
    assert running_gpu_type(dataclasses.replace(untyped, nodes=("c",)), snap) is None
    assert running_gpu_type(dataclasses.replace(untyped, nodes=()), snap) is None


def _mixed(h100_used: int = 0, a40_used: int = 0) -> tuple[Node, ...]:
    return (Node("h0", gpus_total=4, gpus_allocated=h100_used, gpu_type="h100", partitions=("gpu",)),
            Node("a0", gpus_total=4, gpus_allocated=a40_used, gpu_type="a40", partitions=("gpu",)),
            Node("a1", gpus_total=4, gpu_type="a40", partitions=("gpu", "slow")))


def _pending(job_id: int, gpus: int, **fields) -> Job:
    return Job(job_id, name="resnet50", gpus_per_node=gpus, priority=100 - job_id, **{"partition": "gpu", **fields})


def _planned(nodes: tuple[Node, ...], *jobs: Job) -> list[str | None]:
    partitions = (Partition("gpu", nodes=("h0", "a0", "a1"), default=True), Partition("slow", nodes=("a1",)))
    snapshot = ClusterSnapshot(taken_at=0.0, jobs=jobs, nodes=nodes, partitions=partitions)
    planned = planned_types(snapshot, ["a40", "h100"], DecisionMemo(), MODELS)
    return [planned[job.job_id] for job in jobs]


def test_a_job_of_any_type_is_planned_for_the_fastest_type_with_room_in_queue_order():
    """The A40s are the majority (8 GPUs to 4), yet a job asking plain gres/gpu runs wherever
    Slurm finds room: planned for the majority alone, the H100s were left to Slurm (on Gavel,
    every job untyped: 2.46 x FIFO's JCT). In queue order, each takes the fastest type that
    still has room for it, then the other; with room nowhere, the queue that drains soonest."""
    fast = MODELS.for_job("resnet50", "h100").throughput(Config(2))
    assert fast > MODELS.for_job("resnet50", "a40").throughput(Config(2))  # what the order below rests on
    assert _planned(_mixed(), _pending(1, 2), _pending(2, 2), _pending(3, 2)) == ["h100", "h100", "a40"]
    assert _planned(_mixed(h100_used=3), _pending(1, 2)) == ["a40"]  # 1 H100 free: too few
    # nothing free: both queue; the H100 queue (the models make ResNet-50 12 x faster there)
    # takes the first ones, until its GPU-hours per speed pass the A40s'
    busy = _mixed(h100_used=4, a40_used=4)
    busy = busy[:2] + (Node("a1", gpus_total=4, gpus_allocated=4, gpu_type="a40", partitions=("gpu", "slow")),)
    planned = _planned(busy, *(_pending(i, 4) for i in range(1, 11)))
    assert planned[:6] == ["h100"] * 6 and "a40" in planned[6:], planned


def test_a_job_that_chose_its_type_or_could_only_run_on_one_or_was_pinned_keeps_it():
    nodes = _mixed()
    assert _planned(nodes, _pending(1, 1, gpu_type="a40")) == ["a40"]  # asked for: kept even where slower
    assert _planned(nodes, _pending(1, 1, partition="slow")) == ["a40"]  # its partition holds A40s only
    pinned = _pending(1, 1, nodes=("a1",))  # an earlier tick's pin: kept, not flipped each tick
    assert _planned(nodes, pinned) == ["a40"]
