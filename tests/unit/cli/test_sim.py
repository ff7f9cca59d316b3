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
    assert set(data["policies"]) == {"fifo", "window", "window+cap", "window-aware", "zeus", "greenflow", "powerflow", "eaco"}
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


@needs_data
def test_simulate_grows_elastic_jobs_by_checkpoint_and_requeue(tmp_path):
    """60 Gavel jobs on 4 nodes: with every job elastic the controller restarts some larger;
    without --elastic nothing restarts."""
    trace = str(DATA / "job_traces" / "gavel_philly_ee9e8c_seed0.trace")
    runs = {}
    for args in ([], ["--elastic", "1"]):
        out = tmp_path / f"run{len(runs)}.json"
        result = CliRunner().invoke(main, ["simulate", "--trace", trace, "--limit", "60", "--nodes", "4", "--policy",
                                           "fifo", "--carbon", "synthetic", "--json", str(out), *args])
        assert result.exit_code == 0, result.output
        runs[" ".join(args)] = json.loads(out.read_text())
    assert runs[""]["restarts"] == 0 and runs["--elastic 1"]["restarts"] > 0
    assert runs["--elastic 1"]["finished"] == runs[""]["finished"] == 60
    assert "restarts of running jobs" in result.output


@needs_data
def test_simulate_icefrog_with_freezing_jobs_runs_and_freezing_changes_the_result(tmp_path):
    """icefrog resizes by itself (no --shrink needed) and says how often; --freeze changes JCT."""
    trace = str(DATA / "job_traces" / "gavel_philly_ee9e8c_seed0.trace")
    runs = {}
    for args in (["--elastic", "1"], ["--elastic", "1", "--freeze", "1"]):
        out = tmp_path / f"run{len(runs)}.json"
        result = CliRunner().invoke(main, ["simulate", "--trace", trace, "--limit", "60", "--nodes", "4", "--policy",
                                           "icefrog", "--carbon", "synthetic", "--json", str(out), *args])
        assert result.exit_code == 0, result.output
        runs[" ".join(args)] = json.loads(out.read_text())
        assert "restarts of running jobs" in result.output
    plain, frozen = runs["--elastic 1"], runs["--elastic 1 --freeze 1"]
    assert plain["policy"] == frozen["policy"] == "icefrog" and frozen["finished"] == plain["finished"] == 60
    assert frozen["avg_jct_s"] != plain["avg_jct_s"]


def test_simulate_refuses_a_gpu_without_models():
    result = CliRunner().invoke(main, ["simulate", "--true-gpu", "h200", "--limit", "5"])
    assert result.exit_code != 0 and "--true-gpu" in result.output


PHILLY = "timestamp,duration,num_gpus\n"


def philly(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "philly_small.csv"
    path.write_text(PHILLY + "".join(f"{row}\n" for row in rows))
    return path


def usage_error(result) -> str:  # type: ignore[no-untyped-def]
    """Click's one ``Error:`` line of a refused option (exit 2, before any work)."""
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    return line


@pytest.mark.parametrize("args, said", [
    (["--gpu-range", "0"], "'--gpu-range': 0.0 is not in the range x>=1"),
    (["--flex", "-3"], "'--flex': -3.0 is not in the range x>=0"),
    (["--budget", "-1"], "'--budget': -1.0 is not in the range x>0"),
    (["--nodes", "0"], "'--nodes': 0 is not in the range x>=1"),
    (["--limit", "0"], "'--limit': 0 is not in the range x>=1"),
    (["--limit", "-5"], "'--limit': -5 is not in the range x>=1"),
    (["--min-tick", "600", "--max-tick", "60"], "--max-tick: 60 is below --min-tick 600"),
    (["--policy", "nope"], "'--policy': 'nope' is not one of 'fifo', 'window'"),
    (["--elastic", "1.5"], "'--elastic': 1.5 is not in the range 0<=x<=1"),
    (["--shrink"], "--shrink: needs --elastic above 0"),
    (["--shrink-when-dear"], "--shrink-when-dear: needs --elastic above 0"),
    (["--policy", "greenflow+share"], "--policy: greenflow+share needs --share above 0"),
    (["--suspend-after", "-1"], "'--suspend-after': -1.0 is not in the range x>=0"),
])
def test_simulate_refuses_values_that_mean_nothing(tmp_path, args, said):
    trace = philly(tmp_path, "2017-10-09 07:01:55,66.0,1")
    assert said in usage_error(CliRunner().invoke(main, ["simulate", "--trace", str(trace), *args]))


@pytest.mark.parametrize("text, said", [
    ("", "philly_small.csv: empty file"),
    (PHILLY, "philly_small.csv: no jobs to replay"),
])
def test_simulate_on_an_empty_trace_says_so(tmp_path, text, said):
    path = tmp_path / "philly_small.csv"
    path.write_text(text)
    assert said in usage_error(CliRunner().invoke(main, ["simulate", "--trace", str(path)]))


def test_simulate_on_an_unknown_csv_names_the_known_kinds(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text(PHILLY + "2017-10-09 07:01:55,66.0,1\n")
    assert "unknown trace" in usage_error(CliRunner().invoke(main, ["simulate", "--trace", str(path)]))


def test_an_output_path_that_cannot_be_written_is_refused_before_the_run(tmp_path):
    trace = philly(tmp_path, "2017-10-09 07:01:55,66.0,1")
    for option in ("--plot", "--json"):
        result = CliRunner().invoke(main, ["simulate", "--trace", str(trace), option, "/nonexistent/x.png"])
        assert "no directory /nonexistent" in usage_error(result) and "controller ticks" not in result.output


def test_absurd_rows_and_oversized_jobs_are_said_and_json_goes_to_stdout(tmp_path):
    trace = philly(tmp_path, "2017-10-09 07:01:55,600,1", "2017-10-09 07:02:55,1e12,1", "2017-10-09 07:03:55,NaN,2",
                   "2017-10-09 07:04:55,1200,100000")
    result = CliRunner().invoke(main, ["simulate", "--trace", str(trace), "--policy", "fifo", "--carbon", "synthetic",
                                       "--nodes", "2", "--gpus-per-node", "4", "--json", "-"])
    assert result.exit_code == 0, result.output
    assert ("warning: philly_small.csv: dropped 2 of 4 rows: 1 with a missing or unreadable value, "
            "1 longer than a year") in result.stderr
    assert "warning: 1 job(s) ask for more than the cluster's 8 GPUs (up to 100000); they run on all 8" in result.stderr
    data = json.loads(result.stdout)  # nothing but the JSON on stdout; the table went to stderr
    assert data["finished"] == 2 and data["forecast"] == "perfect" and "avg JCT" in result.stderr
    assert not (Path.cwd() / "-").exists()
    assert "forecast: perfect" in result.stderr


def test_simulate_with_co_location_and_power_saving_says_what_sleeping_saved(tmp_path):
    trace = philly(tmp_path, "2017-10-09 07:01:55,600,1", "2017-10-09 09:01:55,600,1")
    result = CliRunner().invoke(main, ["simulate", "--trace", str(trace), "--policy", "greenflow+share", "--share", "1",
                                       "--carbon", "synthetic", "--nodes", "2", "--gpus-per-node", "4",
                                       "--suspend-after", "30"])
    assert result.exit_code == 0, result.output
    assert "greenflow+share" in result.output
    assert "power saving: nodes suspended after 30 min idle saved" in " ".join(result.output.split())
