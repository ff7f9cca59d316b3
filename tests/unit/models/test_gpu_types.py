"""GPU types: names, board limits from the nodes, cap sets and the conservative model of an unprofiled type."""

from __future__ import annotations

import logging

import pytest

from slurm_green.core.models import Config, energy_per_work_j
from slurm_green.models.gpu_types import Board, canonical_gpu, least_energy_ratio
from slurm_green.models.refine import Corrections
from slurm_green.models.registry import FittedRegistry, fitted_params

KNOWN = ("v100", "p100", "k80", "a40", "a100", "h100")


@pytest.mark.parametrize(("name", "expected"), [
    ("h100", "h100"),
    ("NVIDIA H100 80GB HBM3", "h100"),
    ("H100_PCIe", "h100"),
    ("Tesla V100-SXM2-16GB", "v100"),
    ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA A40", "a40"),
    ("NVIDIA RTX A4000", "rtxa4000"),  # not an A40
    ("rtx_a4000", "rtxa4000"),
    ("H200", "h200"),
    ("NVIDIA H200 141GB HBM3e", "h200"),
    ("", "unknown"),
    (None, "unknown"),
])
def test_gres_types_and_nvml_names_map_to_one_type(name: str | None, expected: str) -> None:
    assert canonical_gpu(name, KNOWN) == expected


def test_a_board_must_be_one() -> None:
    with pytest.raises(ValueError, match="not a board"):
        Board(300.0, 200.0, 250.0)
    assert Board(200.0, 700.0, 700.0).min_fraction == pytest.approx(2 / 7)


def test_the_h100_cap_set_reaches_its_board_minimum_below_greenflows_lowest_cap(registry: FittedRegistry) -> None:
    caps = registry.allowed_caps("h100")
    assert caps[0] * 700 == pytest.approx(200, abs=0.5) and caps[-1] == 1.0 and min(caps) < 0.6
    assert list(caps) == sorted(set(caps))
    assert registry.allowed_caps("h100", floor=0.5)[0] == 0.5
    assert registry.allowed_caps("NVIDIA H100 80GB HBM3", accept_cap=False) == (1.0,)
    assert registry.allowed_caps("h100", floor=1.5) == (1.0,)


def test_an_unprofiled_type_is_flagged_logged_once_and_never_better_than_a_profiled_one(
        registry: FittedRegistry, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="slurm_green.models.registry"):
        models = [registry.for_job(job, "NVIDIA H200") for job in registry.job_types]
    assert sum("h200" in r.getMessage() for r in caplog.records) == 1
    assert all(m.gpu_assumed and "no board limits" in m.gpu_note for m in models)
    assert not registry.for_job("resnet50", "h100").gpu_assumed
    for job in registry.job_types:
        assert registry.for_job(job, "h200").throughput(Config(1)) <= registry.for_job(job).throughput(Config(1))


def test_an_unprofiled_type_takes_the_cap_response_on_which_caps_save_least(registry: FittedRegistry) -> None:
    """One measured GPU's whole response, put on the board; not the worst of each parameter
    taken apart (a combination no GPU has, which over-stated a cap's time cost on a real H200
    by 1.8-2.1 uncapped step times)."""
    registry.observe_board("NVIDIA H200", 200.0, 700.0, 700.0)
    board, guess = registry.board("h200"), registry.type_params("h200")[0]
    assert board is not None
    primary = registry.params.types[registry.gpu]
    mine = least_energy_ratio(guess, primary, board)
    assert all(mine >= least_energy_ratio(t, primary, board) - 1e-12 for t in registry.params.types.values())
    # The shape and every job's response come from that one type; and the source says which.
    source = next(t for t in registry.gpu_types if least_energy_ratio(registry.params.types[t], primary, board) == mine)
    fitted = registry.params.types[source]
    assert (guess.gpu.draw_ratio, guess.gpu.exponent) == (fitted.gpu.draw_ratio, fitted.gpu.exponent)
    assert guess.gpu.cap_min == pytest.approx(2 / 7) and guess.gpu.tdp_w == 700.0
    assert all(p.cap == fitted.jobs.get(t, fitted.default).cap for t, p in guess.jobs.items())
    assert f"with {source}'s cap response" in guess.default.source
    assert f"with {source}'s cap response" in registry.for_job("resnet50", "h200").gpu_note


def test_on_a_real_h200_the_conservative_caps_save_energy_and_promise_no_more_than_measured(
        registry: FittedRegistry) -> None:
    """The sweep made on a lent H200 (never fitted): the board model's cap never costs energy
    there, saves at least 10 % on the two compute-bound workloads (the old worst-of-each-
    parameter model saved 1-2 %), and never promised more than was measured (3 %: the two
    runs' noise)."""
    from pathlib import Path

    from slurm_green.models import profiles

    results = Path(__file__).parents[3] / "benchmarks" / "h100" / "results"
    sweep = profiles.cap_sweep(results / "h200_cap_sweep.csv")
    registry.observe_board("NVIDIA H200", 200.0, 700.0, 700.0)
    for workload in ("resnet50", "transformer", "lstm_lm"):
        rows = sweep[workload]
        cap = registry.energy_optimal_cap(workload, "h200")
        row = min(rows, key=lambda r: abs(r.cap_fraction - cap))
        measured = (row.time_s * row.power_w) / (rows[-1].time_s * rows[-1].power_w)
        model = registry.for_job(workload, "h200")
        predicted = energy_per_work_j(model, Config(1, 1, cap)) / energy_per_work_j(model, Config(1))
        assert measured <= 1.0 and predicted >= measured - 0.03, (workload, cap, predicted, measured)
        if workload in ("resnet50", "transformer"):
            assert measured <= 0.9, (workload, cap, measured)


def test_reported_board_limits_shape_the_unprofiled_model_and_the_cap_set(registry: FittedRegistry) -> None:
    registry.observe_board("NVIDIA H200", 200.0, 700.0, 700.0)
    model = registry.for_job("resnet50", "h200")
    assert model.gpu.tdp_w == 700.0 and "board (200-700 W)" in model.gpu_note
    assert registry.allowed_caps("h200")[0] * 700 == pytest.approx(200, abs=0.5)
    # A cap saves it at most what the measured H100 saves: the guess is conservative.
    def saving(m) -> float:  # noqa: ANN001
        return 1 - energy_per_work_j(m, Config(1, 1, 0.5)) / energy_per_work_j(m, Config(1))
    assert saving(model) <= saving(registry.for_job("resnet50", "h100"))


def test_a_profiled_type_on_another_board_is_scaled_to_it(registry: FittedRegistry) -> None:
    registry.observe_board("H100 PCIe", 200.0, 350.0, 350.0)
    model = registry.for_job("resnet50", "h100")
    assert model.gpu.tdp_w == 350.0 and model.gpu_assumed and "scaled" in model.gpu_note
    assert model.power_w(Config(1)) <= 350.0


def test_a_profiled_type_on_a_smaller_board_is_slowed_by_the_board_never_credited_less_energy(
        perf) -> None:  # noqa: ANN001
    """An H100 PCIe (350 W) reported for the fitted 700 W H100: half the power at the same speed
    would be half the energy per unit of work, a saving nobody measured. Like an unprofiled type,
    its speed scales down with the board (and a larger board is never faster)."""
    measured = FittedRegistry(fitted_params(perf))
    smaller, larger = FittedRegistry(fitted_params(perf)), FittedRegistry(fitted_params(perf))
    smaller.observe_board("NVIDIA H100 PCIe", 200.0, 350.0, 350.0)
    larger.observe_board("h100", 200.0, 800.0, 800.0)
    for job in (*measured.job_types, None):
        fitted = measured.for_job(job, "h100")
        for cap in (1.0, 0.6):
            cfg = Config(1, 1, cap)
            scaled = smaller.for_job(job, "h100")
            assert scaled.gpu_assumed
            assert scaled.throughput(Config(1)) == pytest.approx(fitted.throughput(Config(1)) * 0.5)
            assert energy_per_work_j(scaled, cfg) >= energy_per_work_j(fitted, cfg) * (1 - 1e-9), (job, cap)
        assert larger.for_job(job, "h100").throughput(Config(1)) == pytest.approx(fitted.throughput(Config(1)))


def test_board_limits_persist_with_the_corrections(perf, tmp_path) -> None:
    path = tmp_path / "corr.json"
    FittedRegistry(fitted_params(perf), Corrections(path)).observe_board("h200", 150.0, 600.0, 600.0)
    again = FittedRegistry(fitted_params(perf), Corrections(path))
    assert again.board("NVIDIA H200 141GB") == Board(150.0, 600.0, 600.0)
    assert again.allowed_caps("h200")[0] == 0.25


def test_observations_on_another_type_correct_only_that_type(registry: FittedRegistry) -> None:
    cfg = Config(1, 1, 1.0)
    v100, h100 = registry.for_job("imagenet"), registry.for_job("imagenet", "h100")
    before = v100.power_w(cfg)
    registry.observe("imagenet", cfg, measured_power_w=h100.power_w(cfg) * 0.5, gpu="NVIDIA H100 80GB HBM3")
    assert h100.power_w(cfg) < h100.model_power_w(cfg) and v100.power_w(cfg) == before


def test_one_observation_teaches_the_board_and_the_power_of_its_gpu_type(registry: FittedRegistry) -> None:
    from slurm_green.core.models import Observation

    cfg = Config(2, 1, 0.5)
    model = registry.for_job("bert", "NVIDIA H200")
    registry.learn(Observation("bert", cfg, power_w=300.0, gpu="NVIDIA H200", board=(200.0, 700.0, 700.0)))
    assert registry.board("h200") == Board(200.0, 700.0, 700.0)
    learned = registry.for_job("bert", "h200")  # rebuilt on the reported board, corrected by the measurement
    assert learned is not model and learned.gpu.tdp_w == 700.0
    assert learned.power_w(cfg) != learned.model_power_w(cfg)


def test_a_board_from_an_untyped_gres_is_the_registrys_own_type(registry: FittedRegistry) -> None:
    from slurm_green.core.models import Observation

    registry.learn(Observation("bert", Config(1), power_w=200.0, board=(150.0, 300.0, 300.0)))
    assert registry.board() == registry.board("v100") == Board(150.0, 300.0, 300.0)
    assert registry.for_job("bert").gpu_assumed  # a 300 W board is not the fitted 250 W V100: scaled, flagged


def test_board_power_is_each_types_idle_and_maximum(registry: FittedRegistry) -> None:
    """What PWR placement charges (docs/placement.md): waking a GPU costs its idle power, running it up to its maximum."""
    for gpu in registry.gpu_types:
        idle, top = registry.board_power_w(gpu)
        params = registry.type_params(gpu)[0].gpu
        assert (idle, top) == (params.idle_w, params.tdp_w) and 0 < idle < top
    assert registry.board_power_w("h100")[1] == 700.0  # the H100 SXM board measured for this project
