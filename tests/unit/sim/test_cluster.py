from collections import Counter

import pytest

from slurm_green.sim.cluster import ClusterSpec


def test_a_mixed_cluster_splits_its_nodes_into_blocks_per_type():
    spec = ClusterSpec.mixed(5, 4, ("h100", "a40"))
    assert spec.gpu_types == ("h100", "h100", "h100", "a40", "a40") and spec.typed
    assert [spec.type_of(i) for i in (0, 4)] == ["h100", "a40"]
    assert spec.gpus_of_type() == {"h100": 12, "a40": 8}
    assert not ClusterSpec(nodes=2, gpus_per_node=4).typed
    with pytest.raises(ValueError, match="names 1 nodes"):
        ClusterSpec(nodes=2, gpus_per_node=4, gpu_types=("h100",))


def test_jobs_ask_for_types_in_proportion_to_their_gpus_reproducibly():
    spec = ClusterSpec(nodes=4, gpus_per_node=8, gpu_types=("h100", "a40", "a40", "a40"))
    drawn = spec.requested_types(4000)
    assert drawn == spec.requested_types(4000)
    assert Counter(drawn)["h100"] / 4000 == pytest.approx(0.25, abs=0.03)
    assert ClusterSpec(nodes=1, gpus_per_node=4, gpu_type="t4").requested_types(2) == ["t4", "t4"]


def test_a_share_of_the_jobs_ask_for_no_type_reproducibly():
    spec = ClusterSpec.mixed(4, 8, ("h100", "a40"), untyped_share=0.3)
    drawn = spec.requested_types(4000)
    assert drawn == spec.requested_types(4000)
    assert Counter(drawn)[None] / 4000 == pytest.approx(0.3, abs=0.03)
    assert None not in ClusterSpec.mixed(4, 8, ("h100", "a40")).requested_types(400)
    assert ClusterSpec.mixed(4, 8, ("h100", "a40"), untyped_share=1.0).requested_types(3) == [None] * 3
    with pytest.raises(ValueError, match="share of the jobs"):
        ClusterSpec.mixed(4, 8, ("h100", "a40"), untyped_share=1.5)
