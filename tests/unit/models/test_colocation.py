"""Co-location slowdowns must be Gavel's pair measurements, read here straight from the JSON."""

from __future__ import annotations

import json
import math

import pytest

from slurm_green.core.models import Config
from slurm_green.models.colocation import MEASURED_CLIP
from slurm_green.models.power_cap import capped_board_w
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


def test_an_unmeasured_job_without_power_is_taken_as_heavy_as_the_board_allows(registry: FittedRegistry, raw: dict) -> None:
    finite = sorted(inner["null"] / v[0] for key, inner in raw.items() if key.endswith(", 1)")
                    for other, v in inner.items() if other != "null" and v[0] > 0)
    median = finite[len(finite) // 2]
    slow = registry.colocated_slowdown("some-unknown-job", "resnet50")
    load = registry.params.colocation_load["timeslice"]
    assert min(slow) >= median
    assert slow[1] == pytest.approx(1.0 + load.k)  # its partner's: as beside the heaviest job


def test_a_measured_power_makes_an_unknown_job_light_or_heavy(registry: FittedRegistry) -> None:
    """Telemetry's power alone is the proxy: a light unknown job slows its partner less."""
    light = registry.colocation("unknown-a", "unknown-b", "h100", power_a_w=150.0, power_b_w=150.0)
    heavy = registry.colocation("unknown-a", "unknown-b", "h100", power_a_w=650.0, power_b_w=650.0)
    assert 1.0 < light[0] < heavy[0] and light[1] < heavy[1]
    assert light[2] < heavy[2] <= 700.0  # the pair's power, within the H100 board


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


def test_mps_pairs_are_the_h100_mps_run_and_other_gpus_fall_back_to_time_slicing(perf, registry: FittedRegistry) -> None:
    import csv

    with (perf / "h100" / "colocate_timeslice.csv").open() as handle:
        alone = {r["a"]: float(r["a_steps_per_s"]) for r in csv.DictReader(handle) if r["mode"] == "alone"}
    with (perf / "h100" / "colocate_mps.csv").open() as handle:
        pair = next(r for r in csv.DictReader(handle) if (r["a"], r["b"]) == ("resnet50", "transformer"))
    slow = registry.colocated_slowdown("ResNet-50 (batch size 64)", "Transformer (batch size 32)", "h100", "mps")
    assert slow == pytest.approx((alone["resnet50"] / float(pair["a_steps_per_s"]),
                                  alone["transformer"] / float(pair["b_steps_per_s"])))
    a, b = "LM (batch size 80)", "Recommendation (batch size 1024)"
    assert registry.colocated_slowdown(a, b, "v100", "mps") == registry.colocated_slowdown(a, b, "v100")
    with pytest.raises(ValueError, match="unknown sharing mechanism 'mig'"):
        registry.colocation(a, b, "v100", "mig")


def test_the_pair_power_is_near_the_h100s_measured_board_power(perf, registry: FittedRegistry) -> None:
    """Each H100 pair's power (the fit's own data: the load model is fitted on these rows)
    within 20 %; the held-out error is `slurm-green models report`'s."""
    import csv

    for name, mechanism in (("colocate_timeslice.csv", "timeslice"), ("colocate_mps.csv", "mps")):
        with (perf / "h100" / name).open() as handle:
            rows = [r for r in csv.DictReader(handle) if r["mode"].startswith("pair")]
        family = {"resnet50": "ResNet-50 (batch size 64)", "resnet18": "ResNet-18 (batch size 256)",
                  "transformer": "Transformer (batch size 32)", "lstm_lm": "LM (batch size 40)",
                  "recommendation": "Recommendation (batch size 2048)"}
        for r in rows:
            _, _, power = registry.colocation(family[r["a"]], family[r["b"]], "h100", mechanism)
            assert power == pytest.approx(float(r["avg_power_w"]), rel=0.2), (mechanism, r["a"], r["b"])


def test_arrays_agree_with_single_pairs(registry: FittedRegistry) -> None:
    types_a = ["ResNet-18 (batch size 16)", "unknown", "LM (batch size 20)"]
    types_b = ["Recommendation (batch size 512)", "ResNet-50 (batch size 64)", "unknown"]
    arrays = registry.colocation_arrays(types_a, types_b, "v100", "timeslice", [float("nan"), 120.0, float("nan")])
    for i, (a, b) in enumerate(zip(types_a, types_b)):
        one = registry.colocation(a, b, "v100", power_a_w=120.0 if i == 1 else None)
        assert one == pytest.approx(tuple(float(x[i]) for x in arrays))


def test_an_unknown_jobs_power_measured_by_telemetry_replaces_the_board_maximum(registry: FittedRegistry) -> None:
    """The Epilog's metered power of a job nobody profiled (observe) is its heaviness from then on."""
    before = registry.colocation("my-train.sh", "ResNet-50 (batch size 64)", "v100")
    registry.observe("my-train.sh", Config(1), measured_power_w=60.0)  # a light job on a 250 W board
    after = registry.colocation("my-train.sh", "ResNet-50 (batch size 64)", "v100")
    assert after[1] < before[1]  # its partner is slowed less
    assert after[2] < before[2]  # and the pair draws less


@pytest.mark.parametrize(("gpu", "mechanism", "a", "b", "cap"), [
    ("h100", "mps", "ResNet-50 (batch size 64)", "ResNet-18 (batch size 64)", 0.55),  # EaCO's H100 pair
    ("v100", "timeslice", "Transformer (batch size 64)", "LM (batch size 20)", 0.5),
])
def test_a_capped_pair_draws_no_more_than_its_cap_allows(registry: FittedRegistry, gpu: str, mechanism: str,
                                                         a: str, b: str, cap: float) -> None:
    """Each job's power alone under the cap respects it; the pair's sum did not (440 W on an H100
    capped at 385 W): under ``cap_fraction`` it is bounded as one job is, at ``draw_ratio`` of the
    limit. The slowdowns stretch by the clip beyond the deepest measured for the mechanism
    (the H100 pair under MPS: within it, unchanged; time-sliced: none measured, the whole clip),
    and without a cap nothing changes."""
    board = registry.type_params(gpu)[0].gpu
    solo = [registry.for_job(t, gpu).power_w(Config(1, 1, cap)) for t in (a, b)]
    free = registry.colocation(a, b, gpu, mechanism, *solo)
    capped = registry.colocation(a, b, gpu, mechanism, *solo, cap_fraction=cap)
    assert free[2] > cap * board.tdp_w  # the clip binds on this pair
    assert capped[2] == pytest.approx(board.draw_ratio * cap * board.tdp_w) and capped[2] <= cap * board.tdp_w
    stretch = max(1.0, (free[2] - board.idle_w) / (capped[2] - board.idle_w) / MEASURED_CLIP[mechanism])
    assert capped[:2] == pytest.approx((free[0] * stretch, free[1] * stretch))
    assert (stretch == 1.0) == (mechanism == "mps")
    assert registry.colocation(a, b, gpu, mechanism, *solo, cap_fraction=None) == free
    # Below the lowest settable cap the board holds that cap; arrays take one cap per pair, and
    # a cap of 1.0 is none (the Prolog leaves the board's limit): bounded by the maximum, as None.
    lowest = registry.colocation(a, b, gpu, mechanism, *solo, cap_fraction=board.cap_min / 2)
    assert lowest[2] == pytest.approx(max(board.idle_w, board.draw_ratio * board.cap_min * board.tdp_w))
    arrays = registry.colocation_arrays([a, a], [b, b], gpu, mechanism, [solo[0]] * 2, [solo[1]] * 2, [cap, 1.0])
    assert arrays[2][0] == pytest.approx(capped[2])
    assert arrays[2][1] == pytest.approx(free[2])
    heavy = registry.colocation(a, b, gpu, mechanism, board.tdp_w, board.tdp_w, cap_fraction=1.0)
    assert heavy[2] == registry.colocation(a, b, gpu, mechanism, board.tdp_w, board.tdp_w)[2] > board.draw_ratio * board.tdp_w


def test_a_clip_no_measurement_covers_costs_time_and_saves_no_energy(registry: FittedRegistry) -> None:
    """Two ResNet-18 (batch size 64) time-sliced on a V100 slow each other by nothing and draw
    141 W, more than the board draws under a cap of 0.55 or lower (96 W at 0.4). No time-sliced
    pair was measured under a clip, so where it binds both slowdowns stretch by the whole clip,
    ``(demand - idle) / (bound - idle)``, and the pair's energy per unit of both jobs' work is
    no lower than unclipped; where it does not bind, nothing changes. Before, the clip cut the
    power at no cost in time: a 32 % saving at 0.4 that nothing measured."""
    gpu, job = "v100", "ResNet-18 (batch size 64)"
    board = registry.type_params(gpu)[0].gpu
    scale = registry.params.colocation_load["timeslice"].power_scale
    slow = registry.colocated_slowdown(job, job, gpu)  # Gavel's measured pair, at full power
    binding = []
    for cap in registry.allowed_caps(gpu):
        solo = registry.for_job(job, gpu).power_w(Config(1, 1, cap))
        demand = min(board.tdp_w, board.idle_w + scale * sum((solo - board.idle_w) / s for s in slow))
        bound = float(capped_board_w(board, cap))
        ratio = max(1.0, (demand - board.idle_w) / (bound - board.idle_w))
        slow_a, slow_b, power = registry.colocation(job, job, gpu, "timeslice", solo, solo, cap_fraction=cap)
        assert (slow_a, slow_b) == pytest.approx((slow[0] * ratio, slow[1] * ratio)), cap
        assert power == pytest.approx(min(demand, bound)), cap
        unclipped = demand / (1 / slow[0] + 1 / slow[1])
        assert power / (1 / slow_a + 1 / slow_b) >= unclipped * (1 - 1e-9), cap
        binding.append(ratio > 1.0)
    assert any(binding) and not all(binding)


@pytest.mark.parametrize(("a", "b", "cap"), [  # benchmarks/h100/results/hooks.csv: EaCO's four MPS pairs
    ("ResNet-50 (batch size 64)", "ResNet-18 (batch size 64)", 0.55),
    ("ResNet-18 (batch size 64)", "Transformer (batch size 64)", 0.6),
    ("ResNet-18 (batch size 64)", "LM (batch size 20)", 0.6),
    ("ResNet-18 (batch size 64)", "Recommendation (batch size 2048)", 0.35),
])
def test_the_clips_measured_under_mps_cost_no_time_and_a_deeper_one_does(registry: FittedRegistry, a: str, b: str,
                                                                       cap: float) -> None:
    """The four capped H100 pairs under MPS, clipped 11-53 % of their dynamic power, stretched no
    more than their slowdowns without the clip (docs/models.md): up to the deepest of them
    (``MEASURED_CLIP``) a clip costs no time; beyond it, the excess does."""
    board = registry.type_params("h100")[0].gpu
    solo = [registry.for_job(t, "h100").power_w(Config(1, 1, cap)) for t in (a, b)]
    free = registry.colocation(a, b, "h100", "mps", *solo)
    capped = registry.colocation(a, b, "h100", "mps", *solo, cap_fraction=cap)
    ratio = (free[2] - board.idle_w) / (capped[2] - board.idle_w)
    assert 1.1 < ratio <= MEASURED_CLIP["mps"] and capped[:2] == free[:2]
    if ratio > MEASURED_CLIP["mps"] - 0.01:  # the deepest measured is the constant, not a looser one
        deeper = registry.colocation(a, b, "h100", "mps", *solo, cap_fraction=cap - 0.05)
        excess = (free[2] - board.idle_w) / (deeper[2] - board.idle_w) / MEASURED_CLIP["mps"]
        assert excess > 1.0 and deeper[:2] == pytest.approx((free[0] * excess, free[1] * excess))
