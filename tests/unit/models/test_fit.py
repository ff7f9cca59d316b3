"""Each (job type, GPU type) model reproduces what was measured on that GPU, read here straight from the files."""

from __future__ import annotations

import csv
import json

import pytest

from slurm_green.core.models import Config
from slurm_green.models.registry import FittedRegistry


def _h100_rows(perf) -> dict[str, dict[float, dict[str, float]]]:
    out: dict[str, dict[float, dict[str, float]]] = {}
    with (perf / "h100" / "cap_sweep.csv").open() as handle:
        for row in csv.DictReader(handle):
            out.setdefault(row["workload"], {})[float(row["cap_w"])] = {k: float(row[k]) for k in
                                                                        ("steps_per_s", "avg_power_w", "j_per_step")}
    return out


def test_gavel_gpus_reproduce_gavels_own_measurements(perf, registry: FittedRegistry) -> None:
    raw = json.loads((perf / "gavel" / "simulation_throughputs.json").read_text())
    for gpu in ("v100", "p100", "k80"):
        measured = raw[gpu]["('ResNet-50 (batch size 32)', 1)"]["null"]
        assert registry.for_job("ResNet-50 (batch size 32)", gpu).throughput(Config(1)) == pytest.approx(measured)


def test_the_h100_runs_gavels_resnet50_at_the_measured_speed_and_power(perf, registry: FittedRegistry) -> None:
    """The H100 sweep's resnet50 is Gavel's ResNet-50 at batch 128: same model, same batch."""
    rows = _h100_rows(perf)["resnet50"]
    model = registry.for_job("ResNet-50 (batch size 128)", "h100")
    assert model.throughput(Config(1)) == pytest.approx(rows[700.0]["steps_per_s"])
    assert model.power_w(Config(1)) == pytest.approx(rows[700.0]["avg_power_w"])


def test_a40_speed_comes_from_the_same_zeus_sweep_on_both_gpus(perf, registry: FittedRegistry) -> None:
    v100, a40 = registry.for_job("zeus:resnet50"), registry.for_job("zeus:resnet50", "a40")
    batch = int(v100.unit.removeprefix("epochs@bs"))

    def top_time(gpu: str) -> float:
        with (perf / "zeus" / f"summary_power_{gpu}.csv").open() as handle:
            rows = [r for r in csv.DictReader(handle) if r["network"] == "resnet50" and int(r["batch_size"]) == batch]
        top = max(float(r["power_limit"]) for r in rows)
        times = [float(r["time_per_epoch"]) for r in rows if float(r["power_limit"]) == top]
        return sum(times) / len(times)

    assert a40.throughput(Config(1)) / v100.throughput(Config(1)) == pytest.approx(top_time("v100") / top_time("a40"))


def test_every_job_type_draws_its_gpu_types_power(registry: FittedRegistry) -> None:
    """No job type keeps another GPU's power (the Pollux apps drew T4 watts on every GPU before)."""
    for gpu in registry.gpu_types:
        tdp = registry.type_params(gpu)[0].gpu.tdp_w
        for job in registry.job_types:
            model = registry.for_job(job, gpu)
            assert model.gpu.name == gpu and model.power_w(Config(1)) <= tdp
        assert registry.for_job("imagenet", gpu).power_w(Config(1)) > 0.5 * tdp


@pytest.mark.parametrize("workload", ["resnet50", "transformer", "lstm_lm", "recommendation"])
def test_h100_energy_optimal_cap_is_where_the_sweep_put_it(perf, registry: FittedRegistry, workload: str) -> None:
    """Measured: least energy per step at 250-300 W of the 700 W board; the model within one 50 W step."""
    rows = _h100_rows(perf)[workload]
    measured_w = min(rows, key=lambda w: rows[w]["j_per_step"])
    model_w = registry.energy_optimal_cap(workload, "h100") * 700
    assert 250 <= measured_w <= 300
    assert abs(model_w - measured_w) <= 50.0 + 0.5


def test_a_launch_bound_job_gains_nothing_from_an_h100_cap(registry: FittedRegistry) -> None:
    """resnet18 on CIFAR draws about 188 W whatever the cap: the model leaves it uncapped."""
    assert registry.energy_optimal_cap("resnet18", "h100") == 1.0
