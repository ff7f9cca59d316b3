"""Physical sanity of every fitted model, the vectorised helpers, loading and the default."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_green.models import default_registry
from slurm_green.models.base import Config, speedup
from slurm_green.models.builtin_params import load as load_builtin
from slurm_green.models.params import FittedParams
from slurm_green.models.registry import FittedRegistry, fitted_params

gpus = st.integers(min_value=1, max_value=64)
caps = st.floats(min_value=0.0, max_value=1.2, allow_nan=False)


@pytest.fixture(scope="module")
def reg(perf) -> FittedRegistry:
    return FittedRegistry(fitted_params(perf, "v100"))


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_more_gpus_on_the_same_nodes_never_lower_throughput(reg: FittedRegistry, data: st.DataObject) -> None:
    model = reg.for_job(data.draw(st.sampled_from([*reg.job_types, "unknown-job"])))
    g = data.draw(gpus)
    n = data.draw(st.integers(min_value=1, max_value=g))
    c = data.draw(caps)
    assert model.throughput(Config(g + 1, n, c)) >= model.throughput(Config(g, n, c)) * (1 - 1e-12)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_spreading_over_more_nodes_never_raises_throughput(reg: FittedRegistry, data: st.DataObject) -> None:
    model = reg.for_job(data.draw(st.sampled_from(reg.job_types)))
    g = data.draw(st.integers(min_value=2, max_value=64))
    n = data.draw(st.integers(min_value=1, max_value=g - 1))
    c = data.draw(caps)
    assert model.throughput(Config(g, n + 1, c)) <= model.throughput(Config(g, n, c)) * (1 + 1e-12)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_lower_cap_never_raises_throughput_and_power_stays_physical(reg: FittedRegistry, data: st.DataObject) -> None:
    model = reg.for_job(data.draw(st.sampled_from([*reg.job_types, None])))
    g = data.draw(gpus)
    n = data.draw(st.integers(min_value=1, max_value=g))
    lo, hi = sorted((data.draw(caps), data.draw(caps)))
    assert model.throughput(Config(g, n, lo)) <= model.throughput(Config(g, n, hi)) * (1 + 1e-12)
    assert model.power_w(Config(g, n, lo)) <= model.power_w(Config(g, n, hi)) * (1 + 1e-12)
    p = model.power_w(Config(g, n, lo))
    assert g * model.gpu.idle_w * (1 - 1e-12) <= p <= g * model.gpu.tdp_w


def test_vectorised_helpers_match_the_scalar_calls(reg: FittedRegistry) -> None:
    g = np.array([1, 2, 4, 8, 16])[:, None]
    c = np.array([0.3, 0.5, 0.8, 1.0])[None, :]
    for name in ("imagenet", "LM (batch size 20)", "mystery"):
        m = reg.for_job(name)
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
    measured = [t for t in reg.job_types if "default" not in reg.params.jobs[t].source and not t.startswith("zeus:")]
    unknown = reg.for_job("some-job-nobody-profiled")
    assert unknown.params is reg.params.default
    for g, n in [(2, 1), (4, 1), (8, 1), (8, 2), (16, 4), (32, 8), (64, 16)]:
        median = float(np.median([speedup(reg.for_job(t), Config(g, n)) for t in measured]))
        assert speedup(unknown, Config(g, n)) <= median + 1e-9, (g, n)


def test_unknown_type_uses_the_median_cap_curve(perf, reg: FittedRegistry) -> None:
    from slurm_green.models import power_cap, profiles

    groups = profiles.zeus_summary(perf, "v100")
    gpu = power_cap.fit_gpu("v100", 250.0, groups)
    betas = [power_cap.fit_job(rows, gpu).beta for rows in groups.values()]
    assert reg.params.default.cap.beta == pytest.approx(float(np.median(betas)))


def test_builtin_parameters_are_the_current_fit(perf) -> None:
    """The built-in set must be regenerated (``slurm-green models fit --write-builtin``) with the fit."""
    fresh, builtin = fitted_params(perf, "v100").to_dict(), load_builtin().to_dict()
    fresh.pop("meta"), builtin.pop("meta")
    # Same structure and texts; numbers equal up to the last bits that differ between
    # numpy/pandas releases (a refit that matters moves them by far more than 1e-9).
    fresh_leaves, builtin_leaves = _leaves(fresh), _leaves(builtin)
    assert fresh_leaves.keys() == builtin_leaves.keys()
    for path, value in builtin_leaves.items():
        expected = pytest.approx(value, rel=1e-9) if isinstance(value, float) else value
        assert fresh_leaves[path] == expected, path


def _leaves(tree: object, path: str = "") -> dict[str, object]:
    """Every scalar of a nested dict/list, keyed by its path."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in _leaves(sub, f"{path}/{key}").items()}
    if isinstance(tree, list):
        return {k: v for i, sub in enumerate(tree) for k, v in _leaves(sub, f"{path}[{i}]").items()}
    return {path: tree}


def test_without_data_the_builtin_set_runs_the_controller(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SLURM_GREEN_DATA", str(tmp_path / "absent"))
    monkeypatch.delenv("SLURM_GREEN_MODEL_PARAMS", raising=False)
    reg = default_registry()
    assert reg.params.meta["data"].startswith("built-in")
    assert reg.for_job("resnet50").throughput(Config(4)) > reg.for_job("resnet50").throughput(Config(1))


def test_fitted_parameters_round_trip_through_json(perf, tmp_path) -> None:
    params = fitted_params(perf, "v100")
    params.save(tmp_path / "p.json")
    again = FittedParams.load(tmp_path / "p.json")
    assert again.jobs == params.jobs and again.colocation == params.colocation and again.gpus == params.gpus
    reg = default_registry(params_path=tmp_path / "p.json")
    assert reg.for_job("bert").power_w(Config(2, 1, 0.6)) == FittedRegistry(params).for_job("bert").power_w(
        Config(2, 1, 0.6))


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
