"""Co-location slowdowns must be Gavel's pair measurements, read here straight from the JSON."""

from __future__ import annotations

import json
import math

import pytest

from slurm_green.models.registry import FittedRegistry


@pytest.fixture(scope="module")
def raw(perf) -> dict:
    return json.loads((perf / "gavel" / "simulation_throughputs.json").read_text())["v100"]


@pytest.mark.parametrize(("a", "b"), [
    ("ResNet-50 (batch size 64)", "Transformer (batch size 32)"),
    ("A3C", "CycleGAN"),
    ("LM (batch size 80)", "Recommendation (batch size 1024)"),
])
def test_pair_slowdown_is_alone_over_shared_throughput(raw: dict, registry: FittedRegistry, a: str, b: str) -> None:
    alone_a, alone_b = raw[f"('{a}', 1)"]["null"], raw[f"('{b}', 1)"]["null"]
    shared_a, shared_b = raw[f"('{a}', 1)"][f"('{b}', 1)"]
    slow_a, slow_b = registry.colocated_slowdown(a, b)
    assert slow_a == pytest.approx(alone_a / shared_a if shared_a else math.inf)
    assert slow_b == pytest.approx(alone_b / shared_b if shared_b else math.inf)


def test_pairs_that_do_not_fit_are_infinite(raw: dict, registry: FittedRegistry) -> None:
    misfits = [(key, other) for key, inner in raw.items() if key.endswith(", 1)")
               for other, v in inner.items() if other != "null" and v[0] == 0.0]
    assert misfits, "expected Gavel to record some pairs that do not fit"
    key, other = misfits[0]
    a, b = key[2:-5], other[2:-5]
    assert registry.colocated_slowdown(a, b)[0] == math.inf


def test_unmeasured_jobs_get_the_conservative_default(registry: FittedRegistry, raw: dict) -> None:
    finite = sorted(inner["null"] / v[0] for key, inner in raw.items() if key.endswith(", 1)")
                    for other, v in inner.items() if other != "null" and v[0] > 0)
    median = finite[len(finite) // 2]
    slow = registry.colocated_slowdown("some-unknown-job", "resnet50")
    assert slow[0] == slow[1] >= median


def test_names_and_proxies_resolve_to_gavel_pairs(registry: FittedRegistry) -> None:
    assert registry.colocated_slowdown("resnet50", "imagenet") == registry.colocated_slowdown(
        "ResNet-50 (batch size 64)", "ResNet-50 (batch size 64)")


def test_h100_pairs_are_the_h100_time_slicing_run(perf) -> None:
    """Read from colocate_timeslice.csv: slowdown = steps/s alone / steps/s sharing the GPU."""
    import csv

    from slurm_green.models import default_registry

    with (perf / "h100" / "colocate_timeslice.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    alone = {r["a"]: float(r["a_steps_per_s"]) for r in rows if r["mode"] == "alone"}
    pair = next(r for r in rows if (r["a"], r["b"]) == ("resnet50", "lstm_lm"))
    registry = default_registry()
    slow = registry.colocated_slowdown("LM (batch size 40)", "ResNet-50 (batch size 64)", "NVIDIA H100 80GB HBM3")
    assert slow == pytest.approx((alone["lstm_lm"] / float(pair["b_steps_per_s"]),
                                  alone["resnet50"] / float(pair["a_steps_per_s"])))
    assert slow != registry.colocated_slowdown("LM (batch size 40)", "ResNet-50 (batch size 64)")  # not V100's
