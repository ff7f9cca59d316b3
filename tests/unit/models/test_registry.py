"""Physical sanity of every fitted model on every GPU type, the vectorised helpers, loading and the default."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_green.models import default_registry
from slurm_green.core.models import Config, speedup
from slurm_green.models.params import PACKAGED_PATH, FittedParams
from slurm_green.models.registry import MAX_KEPT, FittedRegistry, fitted_params

gpus = st.integers(min_value=1, max_value=64)
caps = st.floats(min_value=0.0, max_value=1.2, allow_nan=False)


@pytest.fixture(scope="module")
def reg(perf) -> FittedRegistry:
    return FittedRegistry(fitted_params(perf))


def gpu_types(reg: FittedRegistry) -> st.SearchStrategy[str]:
    """Every fitted type, and one nobody profiled (its conservative board model must be physical too)."""
    return st.sampled_from([*reg.gpu_types, "h200"])


def measured_drops(perf) -> set[tuple[str, str, int]]:
    """(job type, GPU type, g) where Gavel's own table measured fewer steps/s at the next GPU
    count after g than at g (LM on a P100: 77.1 at 1 GPU, 72.5 at 2): the model keeps what was measured."""
    table = json.loads((perf / "gavel" / "simulation_throughputs.json").read_text())
    drops = set()
    for gpu, rows in table.items():
        counts: dict[str, dict[int, float]] = {}
        for key, value in rows.items():
            job, _, count = key.strip("()").rpartition(", ")
            if isinstance(value, dict):
                value = value.get("null")
            if isinstance(value, (int, float)) and count.isdigit():
                counts.setdefault(job.strip("'\""), {})[int(count)] = float(value)
        for job, by_count in counts.items():
            ordered = sorted(by_count)
            drops |= {(job, gpu, a) for a, b in zip(ordered, ordered[1:]) if by_count[b] < by_count[a]}
    return drops


def test_more_gpus_on_the_same_nodes_never_lower_throughput_unless_measured_so(reg: FittedRegistry, perf) -> None:
    """Every job type and GPU type, 1-64 GPUs on 1, 2, 4, 8 or all nodes, caps 0-1.2: exhaustive, so
    a drop is found every run or never (a random draw found this one only now and then)."""
    drops = measured_drops(perf)
    found = []
    for job_type in [*reg.job_types, "unknown-job"]:
        for gpu in [*reg.gpu_types, "h200"]:
            model = reg.for_job(job_type, gpu)
            for g in range(1, 64):
                for n in sorted({1, 2, 4, 8, g} & set(range(1, g + 1))):
                    for c in (0.0, 0.3, 0.5, 0.7, 1.0, 1.2):
                        if model.throughput(Config(g + 1, n, c)) < model.throughput(Config(g, n, c)) * (1 - 1e-12):
                            found.append((job_type, gpu, g))
    assert found and set(found) <= drops  # the measured drops are kept; none is made up


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_spreading_over_more_nodes_never_raises_throughput(reg: FittedRegistry, data: st.DataObject) -> None:
    model = reg.for_job(data.draw(st.sampled_from(reg.job_types)), data.draw(gpu_types(reg)))
    g = data.draw(st.integers(min_value=2, max_value=64))
    n = data.draw(st.integers(min_value=1, max_value=g - 1))
    c = data.draw(caps)
    assert model.throughput(Config(g, n + 1, c)) <= model.throughput(Config(g, n, c)) * (1 + 1e-12)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_lower_cap_never_raises_throughput_and_power_stays_physical(reg: FittedRegistry, data: st.DataObject) -> None:
    """A busy GPU draws less under a lower cap. Averaged over a step with gradient sync the
    power may rise (the GPU is busy for more of the step: e.g. P100's LM at batch 40 on 5 nodes,
    the conservative H200 model): so per-GPU power is checked where no sync dilutes it."""
    model = reg.for_job(data.draw(st.sampled_from([*reg.job_types, None])), data.draw(gpu_types(reg)))
    g = data.draw(gpus)
    n = data.draw(st.integers(min_value=1, max_value=g))
    lo, hi = sorted((data.draw(caps), data.draw(caps)))
    assert model.throughput(Config(g, n, lo)) <= model.throughput(Config(g, n, hi)) * (1 + 1e-12)
    assert model.power_w(Config(1, 1, lo)) <= model.power_w(Config(1, 1, hi)) * (1 + 1e-12)
    p = model.power_w(Config(g, n, lo))
    assert g * model.gpu.idle_w * (1 - 1e-12) <= p <= g * model.gpu.tdp_w


def test_vectorised_helpers_match_the_scalar_calls(reg: FittedRegistry) -> None:
    g = np.array([1, 2, 4, 8, 16])[:, None]
    c = np.array([0.3, 0.5, 0.8, 1.0])[None, :]
    for name, gpu in (("imagenet", None), ("LM (batch size 20)", "h100"), ("mystery", "a40")):
        m = reg.for_job(name, gpu)
        t, p = m.throughput_array(g, 2, c), m.power_w_array(g, 2, c)
        for i, gi in enumerate(g[:, 0]):
            for j, cj in enumerate(c[0]):
                assert t[i, j] == pytest.approx(m.throughput(Config(int(gi), 2, float(cj))))
                assert p[i, j] == pytest.approx(m.power_w(Config(int(gi), 2, float(cj))))


def test_single_gpu_full_power_reproduces_the_measured_base(perf, reg: FittedRegistry) -> None:
    raw = json.loads((perf / "gavel" / "simulation_throughputs.json").read_text())
    measured = raw["v100"]["('Transformer (batch size 64)', 1)"]["null"]
    assert reg.for_job("Transformer (batch size 64)").throughput(Config(1)) == pytest.approx(measured)


def test_unknown_type_scales_no_better_than_the_median_known_type(reg: FittedRegistry) -> None:
    jobs = reg.params.types["v100"].jobs
    measured = [t for t in reg.job_types if "default" not in jobs[t].source and not t.startswith("zeus:")]
    unknown = reg.for_job("some-job-nobody-profiled")
    assert unknown.params is reg.params.types["v100"].default
    for g, n in [(2, 1), (4, 1), (8, 1), (8, 2), (16, 4), (32, 8), (64, 16)]:
        median = float(np.median([speedup(reg.for_job(t), Config(g, n)) for t in measured]))
        assert speedup(unknown, Config(g, n)) <= median + 1e-9, (g, n)


def test_unknown_type_uses_the_median_cap_curve(perf, reg: FittedRegistry) -> None:
    from slurm_green.models import power_cap, profiles

    groups = profiles.zeus_summary(perf, "v100")
    gpu = power_cap.fit_gpu("v100", 250.0, groups)
    betas = [power_cap.fit_job(rows, gpu).beta for rows in groups.values()]
    assert reg.params.types["v100"].default.cap.beta == pytest.approx(float(np.median(betas)))


def test_packaged_parameters_are_the_current_fit(perf) -> None:
    """The packaged file must be refitted (``slurm-green models fit --out`` it) with the fit or the data."""
    fresh, packaged = fitted_params(perf).to_dict(), FittedParams.load(PACKAGED_PATH).to_dict()
    # Same structure and texts; numbers equal up to the last bits that differ between
    # numpy/pandas releases (a refit that matters moves them by far more than 1e-9).
    fresh_leaves, packaged_leaves = _leaves(fresh), _leaves(packaged)
    assert fresh_leaves.keys() == packaged_leaves.keys()
    for path, value in packaged_leaves.items():
        expected = pytest.approx(value, rel=1e-9) if isinstance(value, float) else value
        assert fresh_leaves[path] == expected, path


def _leaves(tree: object, path: str = "") -> dict[str, object]:
    """Every scalar of a nested dict/list, keyed by its path."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in _leaves(sub, f"{path}/{key}").items()}
    if isinstance(tree, list):
        return {k: v for i, sub in enumerate(tree) for k, v in _leaves(sub, f"{path}[{i}]").items()}
    return {path: tree}


def test_the_default_registry_loads_the_packaged_file_and_never_fits(perf, monkeypatch) -> None:
    """Profile data beside the checkout changes nothing: fitting is an explicit command."""
    from slurm_green.models import fit

    monkeypatch.setenv("SLURM_GREEN_DATA", str(perf.parent))
    monkeypatch.delenv("SLURM_GREEN_MODEL_PARAMS", raising=False)
    monkeypatch.setattr(fit, "fit_all", lambda *_: pytest.fail("default_registry fitted"))
    reg = default_registry()
    assert reg.params_id == FittedParams.load(PACKAGED_PATH).params_id
    assert reg.for_job("resnet50").throughput(Config(4)) > reg.for_job("resnet50").throughput(Config(1))


def test_the_packaged_file_is_package_data() -> None:
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    assert "models/fitted_params.json" in pyproject["tool"]["setuptools"]["package-data"]["slurm_green"]
    assert PACKAGED_PATH.parent.name == "models" and PACKAGED_PATH.is_file()


def test_a_site_file_from_the_environment_or_the_argument_wins(perf, tmp_path, monkeypatch) -> None:
    data = fitted_params(perf).to_dict()
    data["types"]["v100"]["jobs"][0]["base_throughput"] *= 2
    site = FittedParams.from_dict(data)
    site.save(tmp_path / "site.json")
    monkeypatch.setenv("SLURM_GREEN_MODEL_PARAMS", str(tmp_path / "site.json"))
    assert default_registry().params_id == site.params_id != fitted_params(perf).params_id
    monkeypatch.delenv("SLURM_GREEN_MODEL_PARAMS")
    assert default_registry(params_path=tmp_path / "site.json").params_id == site.params_id


def test_fitted_parameters_round_trip_through_json_with_their_id(perf, tmp_path) -> None:
    params = fitted_params(perf)
    params.save(tmp_path / "p.json")
    again = FittedParams.load(tmp_path / "p.json")
    assert again.types == params.types and again.colocation == params.colocation
    assert again.params_id == params.params_id and len(params.params_id) == 12
    reg = default_registry(params_path=tmp_path / "p.json")
    assert reg.for_job("bert", "h100").power_w(Config(2, 1, 0.6)) == FittedRegistry(params).for_job(
        "bert", "h100").power_w(Config(2, 1, 0.6))


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "not a fitted-parameters file"),
    (json.dumps({"format_version": 1}), "format 1, expected 3"),
    (json.dumps({"format_version": 3, "types": {}}), "not a fitted-parameters file"),
])
def test_a_bad_parameter_file_is_one_clear_error_naming_it(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as error:
        default_registry(params_path=path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_a_missing_parameter_file_says_how_to_make_one(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="models fit --data DIR --out FILE"):
        default_registry(params_path=tmp_path / "absent.json")


def test_an_unfitted_primary_type_is_refused(perf) -> None:
    with pytest.raises(ValueError, match="no fitted parameters for GPU type 'h200'"):
        FittedRegistry(fitted_params(perf), gpu="h200")
    assert FittedRegistry(fitted_params(perf), gpu="NVIDIA H100 80GB HBM3").gpu == "h100"


def test_evaluations_are_cheap(reg: FittedRegistry) -> None:
    models = [reg.for_job(t) for t in reg.job_types]
    configs = [Config(g, max(1, g // 4), c) for g in (1, 2, 4, 8, 16) for c in (0.5, 0.75, 1.0)]
    start = time.perf_counter()
    calls = 0
    for _ in range(20):
        for m in models:
            for cfg in configs:
                m.throughput(cfg)
                m.power_w(cfg)
                calls += 2
    per_call = (time.perf_counter() - start) / calls
    assert per_call < 20e-6, f"{per_call * 1e6:.1f} us per call"


def test_the_models_kept_per_job_name_are_bounded(reg: FittedRegistry) -> None:
    """One model (and one ``assumed`` answer) per job name: a controller whose users name every
    job afresh must not keep one per job for its whole life; one rebuilt answers the same."""
    first = reg.for_job("resnet50-run-0")
    for i in range(MAX_KEPT + 5):
        reg.for_job(f"resnet50-run-{i}")
        reg.assumed(f"run-{i}")
    assert len(reg._models) <= MAX_KEPT and len(reg._assumed) <= MAX_KEPT
    again = reg.for_job("resnet50-run-0")
    assert again.throughput(Config(4)) == first.throughput(Config(4))
    assert again.power_w(Config(4, 1, 0.7)) == first.power_w(Config(4, 1, 0.7))
