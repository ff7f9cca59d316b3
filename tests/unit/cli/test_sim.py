import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_green.carbon.datasets import shared_data_dir
from slurm_green.cli import main

DATA = shared_data_dir()
FIXTURE = Path(__file__).resolve().parents[1] / "slurm" / "fixtures" / "24.11" / "sacct.txt"
needs_data = pytest.mark.skipif(not (DATA / "job_traces").exists(), reason=f"shared data not found at {DATA}")


@needs_data
def test_bench_writes_every_policy_and_the_lower_bound(tmp_path):
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(main, ["bench", "--limit", "30", "--no-sweep", "--carbon", "GB", "--json", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert set(data["policies"]) == {"fifo", "window", "window+cap", "zeus", "greenflow", "powerflow"}
    for numbers in data["policies"].values():
        assert numbers["avg_jct_s"] > 0 and numbers["energy_kwh"] > 0 and numbers["carbon_kg"] > 0
        assert numbers["carbon_kg"] >= data["lower_bound_carbon_kg"]
    assert data["policies"]["fifo"]["carbon_ratio"] == 1.0


@needs_data
def test_simulate_reports_and_plots(tmp_path):
    out, png = tmp_path / "run.json", tmp_path / "run.png"
    result = CliRunner().invoke(main, ["simulate", "--limit", "20", "--policy", "zeus", "--carbon", "synthetic",
                                       "--json", str(out), "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["finished"] == 20 and png.stat().st_size > 0


def test_simulate_rejects_an_unknown_policy():
    result = CliRunner().invoke(main, ["simulate", "--policy", "nope"])
    assert result.exit_code != 0 and "unknown policy" in result.output


@pytest.mark.skipif(not FIXTURE.exists(), reason="no 24.11 sacct capture")
def test_whatif_replays_a_real_sacct_capture(tmp_path):
    out = tmp_path / "whatif.json"
    result = CliRunner().invoke(main, ["whatif", "--sacct", str(FIXTURE), "--carbon", "synthetic", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["policies"]["greenflow"]["finished"] == 4


@needs_data
def test_simulate_runs_jobs_as_another_gpu_and_learns(tmp_path):
    runs = {}
    for args in ([], ["--true-gpu", "p100"], ["--true-gpu", "p100", "--learn"]):
        out = tmp_path / f"run{len(runs)}.json"
        result = CliRunner().invoke(main, ["simulate", "--limit", "30", "--policy", "fifo", "--carbon", "synthetic",
                                           "--json", str(out), *args])
        assert result.exit_code == 0, result.output
        runs[" ".join(args)] = json.loads(out.read_text())
    assert runs["--true-gpu p100"]["energy_kwh"] != runs[""]["energy_kwh"]  # the jobs ran as P100s
    assert runs["--true-gpu p100 --learn"]["energy_kwh"] == runs["--true-gpu p100"]["energy_kwh"]  # FIFO ignores models


def test_simulate_refuses_a_gpu_without_models():
    result = CliRunner().invoke(main, ["simulate", "--true-gpu", "h100", "--limit", "5"])
    assert result.exit_code != 0 and "--true-gpu" in result.output
