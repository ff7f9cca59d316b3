"""[carbon] in the controller's config: no source by default, 'synthetic' only where allowed,
spec mistakes refused at load, and sources that are broken at start never stop the controller.

The controller here runs real ticks (assemble -> feed -> tick) on an in-memory cluster; its
carbon comes from real files and a real local HTTP server.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pandas as pd
import pytest
from test_tick import MemoryBackend, deferred_job

from slurm_green.carbon.source import NoCarbonSource
from slurm_green.controller.assemble import assemble
from slurm_green.controller.config import Config, ConfigError, load_config
from slurm_green.core.actions import SetStartTime
from slurm_green.core.clock import ManualClock
from slurm_green.core.cluster import Job

NOW = pd.Timestamp("2026-01-05 10:30", tz="UTC").timestamp()


def write_config(tmp_path, carbon: str) -> Config:
    path = tmp_path / "config.toml"
    path.write_text(f'[controller]\nstate_db = "{tmp_path / "state.db"}"\n'
                    f'decision_key_file = "{tmp_path / "no.key"}"\n{carbon}')
    return load_config(path)


def hourly_csv(path, low_from: int = 3) -> str:
    """Two weeks of hourly data, high except a low stretch ``low_from`` hours into every day."""
    stamps = pd.date_range("2023-05-01T00:00Z", periods=24 * 14, freq="h")
    rows = [f"{t.isoformat()},{60 if low_from <= t.hour < low_from + 4 else 450}" for t in stamps]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    return str(path)


def tick(config: Config, jobs: Sequence[Job]):
    parts = assemble(config, clock=ManualClock(NOW))
    try:
        parts.feed.refresh()
    except Exception:
        pass  # what `run` does: a failed first fetch is logged, the controller goes on
    parts.controller.backend = MemoryBackend(jobs, taken_at=NOW)
    return parts, parts.controller.tick(NOW)


def test_no_carbon_section_means_no_source_and_a_carbon_agnostic_controller_that_says_so(tmp_path, caplog):
    config = write_config(tmp_path, "")
    assert config.carbon.sources == [] and not config.carbon.allow_synthetic
    with caplog.at_level(logging.WARNING):
        parts, report = tick(config, [deferred_job(1, NOW)])
    assert "no carbon source configured ([carbon] sources): the controller is carbon-agnostic" in caplog.text
    assert isinstance(parts.feed.source, NoCarbonSource)
    assert [a for a in report.actions if isinstance(a, SetStartTime)] == [SetStartTime(1, NOW)]
    assert any("no carbon source configured" in note for note in report.notes)


@pytest.mark.parametrize("sources", ['["synthetic"]', '["ukgrid", "synthetic"]', '["ukgrid,synthetic"]'])
def test_synthetic_is_refused_in_one_line_naming_the_fix(tmp_path, sources):
    with pytest.raises(ConfigError) as info:
        write_config(tmp_path, f"[carbon]\nsources = {sources}\n")
    [line] = [line for line in str(info.value).splitlines() if "carbon.sources" in line]
    assert "'synthetic' is made-up data and never drives a controller" in line
    assert "remove it from [carbon] sources (no source = carbon-agnostic)" in line
    assert "set [carbon] allow_synthetic = true for a demo" in line


def test_synthetic_where_allowed_drives_the_controller_and_the_log_says_so(tmp_path, caplog):
    config = write_config(tmp_path, '[carbon]\nallow_synthetic = true\nsources = ["synthetic"]\n')
    with caplog.at_level(logging.WARNING):
        parts, report = tick(config, [deferred_job(1, NOW)])
    assert "'synthetic' (made-up numbers) may drive this controller" in caplog.text
    assert report.carbon_source == "synthetic"


@pytest.mark.parametrize(("spec", "message"), [
    ("electricitymap:DE", "unknown source kind 'electricitymap'"),
    ("csv:/x.csv?replay=maybe", "replay='maybe' is not a boolean"),
    ("csv:/x.csv?tz=Mars/Olympus", "tz='Mars/Olympus' is not a timezone name"),
])
def test_a_spec_mistake_is_refused_at_load_naming_the_key(tmp_path, spec, message):
    with pytest.raises(ConfigError, match=r"carbon.sources: .*" + message.replace("(", r"\(")):
        write_config(tmp_path, f'[carbon]\nsources = ["{spec}"]\n')


def test_a_missing_file_or_token_is_not_a_config_error(tmp_path, monkeypatch):
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN", raising=False)
    monkeypatch.delenv("ELECTRICITYMAPS_TOKEN_FILE", raising=False)
    config = write_config(tmp_path, f'[carbon]\nsources = ["electricitymaps:DE", "csv:{tmp_path}/absent.csv"]\n')
    assert len(config.carbon.sources) == 2


GARBAGE = {"unreadable-bytes": b"\x00\xff\xfe\x81", "empty": b"", "wrong-layout": b"a;b\n1;2\n",
           "six-hour-gap": None, "missing": "absent"}


@pytest.mark.parametrize("fault", sorted(GARBAGE))
def test_a_broken_csv_at_start_falls_through_to_the_next_source(tmp_path, fault, caplog):
    broken = tmp_path / "broken.csv"
    if fault == "six-hour-gap":
        hourly_csv(broken)
        lines = broken.read_text().splitlines()
        broken.write_text("\n".join(lines[:50] + lines[56:]) + "\n")
    elif GARBAGE[fault] != "absent":
        broken.write_bytes(GARBAGE[fault])
    good = hourly_csv(tmp_path / "good.csv")
    config = write_config(tmp_path, f'[carbon]\nsources = ["csv:{broken}?replay=1", "csv:{good}?replay=1"]\n'
                                    f'cache_dir = "{tmp_path}/cache"\n')
    with caplog.at_level(logging.WARNING):
        parts, report = tick(config, [deferred_job(1, NOW)])
    assert report.carbon_source == f"csv:{good}?replay=1"
    [warning] = [r.getMessage() for r in caplog.records if "falling through" in r.getMessage()]
    assert warning.startswith(f"carbon source csv:{broken}?replay=1 failing, falling through to the next: ")


def test_every_source_broken_at_start_the_controller_runs_and_releases_deferred_jobs(tmp_path, httpserver):
    broken = tmp_path / "broken.csv"
    broken.write_bytes(b"\x00\xff garbage")
    httpserver.expect_request("/intensity/2026-01-05T10:30Z/fw48h").respond_with_data("<html>down</html>")
    config = write_config(tmp_path, f'[carbon]\nsources = ["csv:{broken}?replay=1", '
                                    f'"ukgrid?base_url={httpserver.url_for("")}"]\n'
                                    f'cache_dir = "{tmp_path}/cache"\n')
    parts, report = tick(config, [deferred_job(1, NOW), deferred_job(2, NOW)])
    assert report.carbon_source is None
    assert [a for a in report.actions if isinstance(a, SetStartTime)] == [SetStartTime(1, NOW), SetStartTime(2, NOW)]
    [note] = [n for n in report.notes if "carbon data unavailable" in n]
    assert "every carbon source failed" in note and "broken.csv" in note and "ukgrid" in note


def test_a_source_failing_mid_run_falls_through_at_the_next_refresh(tmp_path):
    first = tmp_path / "first.csv"
    hourly_csv(first, low_from=10)
    second = hourly_csv(tmp_path / "second.csv", low_from=3)
    config = write_config(tmp_path, f'[carbon]\nsources = ["csv:{first}?replay=1", "csv:{second}?replay=1"]\n'
                                    f'cache_dir = "{tmp_path}/cache"\n')
    parts, report = tick(config, [deferred_job(1, NOW)])
    assert report.carbon_source == f"csv:{first}?replay=1"
    first.write_text("timestamp,value\nnot,numbers\n")
    parts.feed.refresh()
    assert parts.controller.tick(NOW).carbon_source == f"csv:{second}?replay=1"


def test_plan_s_assembly_writes_no_carbon_cache(tmp_path):
    config = write_config(tmp_path, f'[carbon]\nsources = ["csv:{hourly_csv(tmp_path / "good.csv")}?replay=1"]\n'
                                    f'cache_dir = "{tmp_path}/cache"\n')
    parts = assemble(config, dry_run=True, with_store=False, clock=ManualClock(NOW))
    assert parts.feed.refresh().source.endswith("good.csv?replay=1")
    assert not (tmp_path / "cache").exists()
    assemble(config, clock=ManualClock(NOW)).feed.refresh()
    assert (tmp_path / "cache" / "carbon.json").exists()
