import numpy as np
import pytest

from slurm_green.carbon.datasets import shared_data_dir
from slurm_green.models import default_registry
from slurm_green.policy.placement.framework import MILLI, Request
from slurm_green.policy.placement.scorer import Context, Scorer
from slurm_green.sim import openb

TRACES = shared_data_dir() / "job_traces"
needs_data = pytest.mark.skipif(not (TRACES / openb.POD_LIST).exists(),
                                reason=f"shared traces not found at {TRACES} (SLURM_GREEN_DATA)")


@needs_data
def test_the_pod_and_node_lists_read_as_provenance_counts_them():
    cluster = openb.read_nodes(TRACES / openb.NODE_LIST)
    assert len(cluster.names) == 1213 and cluster.gpu_capacity_milli == 6212 * MILLI
    assert dict(zip(cluster.models, np.bincount(cluster.model, weights=cluster.gpus).astype(int), strict=True))["G2"] \
        == 549 * 8
    pods = openb.read_pods(TRACES / openb.POD_LIST, cluster.models)
    assert len(pods) == 8152
    assert np.bincount([p.gpus for p in pods]).tolist() == [1088, 6989, 16, 0, 15, 0, 0, 0, 44]
    assert sum(p.partial for p in pods) == 3078
    assert all(p.models is None for p in pods)  # the default trace names no GPU model


def test_arrivals_stop_once_the_requests_reach_the_ratio():
    pods = [Request(1), Request(1, 250), Request(0, cpu_milli=1000)]
    arrivals = openb.inflate(pods, capacity_milli=20 * MILLI, ratio=1.3, seed=0)
    total = sum(r.total_milli for r in arrivals)
    assert total >= 26 * MILLI and total - arrivals[-1].total_milli < 26 * MILLI


def test_the_replay_records_the_unallocated_share_and_power_at_each_level():
    cluster = openb.Cluster(("a", "b"), ("v100",), np.zeros(2, dtype=np.int64), np.array([2, 2]),
                            np.array([8000, 8000]), np.array([1 << 20, 1 << 20]))
    nodes = cluster.empty_nodes()
    scorer = Scorer.from_weights({"packing": 1.0}, Context(nodes))
    idle, top = np.array([50.0]), np.array([250.0])
    arrivals = [Request(2), Request(1), Request(2), Request(1)]  # the second 2-GPU task finds no node
    result = openb.replay(cluster, arrivals, scorer, nodes, idle, top, levels_pct=(50, 75, 100, 150))
    assert result.unallocated_pct == (50.0, 25.0, 25.0, 0.0) and result.failed == 1
    assert result.power_kw[0] == pytest.approx(0.5) and result.power_kw[-1] == pytest.approx(1.0)
    assert result.gpus_in_use == (2, 3, 3, 4) and result.nodes_awake == (1, 2, 2, 2)


def test_gpu_power_comes_from_the_models_with_the_public_boards_told():
    idle, top = openb.gpu_power_by_model(default_registry(), ("T4", "V100M16"))
    assert top.tolist() == [70.0, 250.0] and (idle < top).all()
