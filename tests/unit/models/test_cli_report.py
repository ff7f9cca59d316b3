"""``slurm-green models report|fit|show`` (kept with the models tests: the CLI module is this area's)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from slurm_green.cli import main
from slurm_green.models.params import PACKAGED_PATH, FittedParams


def test_report_json_lists_every_source_and_each_gpu_types_optimal_cap(perf) -> None:
    result = CliRunner().invoke(main, ["models", "report", "--json", "--data", str(perf.parent)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert {p["source"] for p in report["pooled"]} == {"gavel", "pollux", "zeus", "h100"}
    assert {"measured_all_sweeps", "measured_cap_bound", "model_cap_bound"} <= set(report["energy_optimal_cap"]["h100"])
    types = {o["gpu"]: o for o in report["gpu_types"]}
    assert set(types) == {"v100", "p100", "k80", "a40", "a100", "h100"}
    # The H100 finding: its energy-optimal cap is below GreenFlow's lowest (0.6), its board reaches 200 W.
    assert types["h100"]["cap_fraction"] < 0.6 and types["h100"]["board_min_w"] == 200.0
    assert report["params_id"] == FittedParams.load(PACKAGED_PATH).params_id
    assert [h["rows"] for h in report["freezing"]] == [8, 8]


def test_report_table_and_missing_data(perf, tmp_path) -> None:
    result = CliRunner().invoke(main, ["models", "report", "--data", str(perf.parent)])
    assert result.exit_code == 0 and "Held-out error" in result.output and "per GPU type" in result.output
    missing = CliRunner().invoke(main, ["models", "report", "--data", str(tmp_path)])
    assert missing.exit_code != 0 and "no profile data" in missing.output


def test_fit_writes_a_file_a_controller_loads_and_show_names_it(perf, tmp_path) -> None:
    out = tmp_path / "site.json"
    result = CliRunner().invoke(main, ["models", "fit", "--data", str(perf.parent), "--out", str(out)])
    assert result.exit_code == 0, result.output
    params_id = FittedParams.load(out).params_id
    assert params_id in result.output
    shown = CliRunner().invoke(main, ["models", "show", "--params", str(out)])
    assert shown.exit_code == 0 and params_id in shown.output and "h100  board 200-700 W" in shown.output


def test_fit_needs_an_output_and_a_real_directory(perf, tmp_path) -> None:
    assert CliRunner().invoke(main, ["models", "fit", "--data", str(perf.parent)]).exit_code != 0
    bad = CliRunner().invoke(main, ["models", "fit", "--data", str(perf.parent), "--out", str(tmp_path / "no" / "x.json")])
    assert bad.exit_code != 0 and "no such directory" in bad.output


def test_show_with_a_broken_file_is_one_line(tmp_path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{")
    result = CliRunner().invoke(main, ["models", "show", "--params", str(path)])
    assert result.exit_code != 0 and "not a fitted-parameters file" in result.output
    assert "Traceback" not in result.output


def test_report_adds_the_types_a_sites_nodes_reported(perf, tmp_path) -> None:
    """An H200 node's Epilog taught the controller its board: the report shows it, flagged."""
    from slurm_green.models.refine import Corrections
    from slurm_green.models.registry import default_registry

    path = tmp_path / "corrections.json"
    default_registry(corrections_path=path).observe_board("NVIDIA H200", 200.0, 700.0, 700.0)
    result = CliRunner().invoke(main, ["models", "report", "--json", "--data", str(perf.parent),
                                       "--corrections", str(path)])
    assert result.exit_code == 0, result.output
    types = {o["gpu"]: o for o in json.loads(result.output)["gpu_types"]}
    assert types["h200"]["assumed"] and not types["h100"]["assumed"]
    assert (types["h200"]["board_min_w"], types["h200"]["board_max_w"]) == (200.0, 700.0)
    assert 0.0 < types["h200"]["energy_saved"] < types["h100"]["energy_saved"]  # caps pay, less than measured ones
    assert Corrections(path).boards == {"h200": (200.0, 700.0, 700.0)}
    path.write_text("{")
    broken = CliRunner().invoke(main, ["models", "report", "--data", str(perf.parent), "--corrections", str(path)])
    assert broken.exit_code != 0 and "Traceback" not in broken.output and len(broken.output.strip().splitlines()) == 1
