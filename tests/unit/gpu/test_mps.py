"""The MPS daemon's start and stop by the hooks, against a fake nvidia-cuda-mps-control.

The fake is the outer edge (no GPU here): a shell script that keeps its daemon as a file,
answers commands on standard input only while that daemon "runs", and writes what it was
asked to ``calls``.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from slurm_green.gpu import epilog, mps, prolog
from slurm_green.gpu.settings import GpuSettings

FAKE = """#!/bin/sh
dir=$(dirname "$0")
[ -e "$dir/hang" ] && sleep 30
if [ "$1" = "-d" ]; then
    [ -e "$dir/fail-start" ] && { echo "cannot start the daemon" >&2; exit 1; }
    echo "daemon CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES" >> "$dir/calls"
    touch "$dir/daemon"; exit 0
fi
read -r cmd
[ -e "$dir/daemon" ] || { echo "Cannot find MPS control daemon process" >&2; exit 1; }
[ "$cmd" = get_server_list ] && exit 0
echo "$cmd" >> "$dir/calls"
[ "$cmd" = quit ] && rm -f "$dir/daemon"
exit 0
"""


@pytest.fixture
def site(tmp_path):
    binary = tmp_path / "bin" / "nvidia-cuda-mps-control"
    binary.parent.mkdir()
    binary.write_text(FAKE)
    binary.chmod(0o755)
    return GpuSettings(state_dir=tmp_path / "state", backend="none", mps_control=binary)


def calls(site: GpuSettings) -> list[str]:
    path = site.mps_control.parent / "calls"
    return path.read_text().splitlines() if path.exists() else []


def mps_job(uid: int, gpus: str = "2") -> dict[str, str]:
    return {"CUDA_VISIBLE_DEVICES": gpus, mps.MPS_MARK: "50", "SLURM_JOB_UID": str(uid)}


def test_the_first_mps_job_starts_daemon_and_server_and_the_last_one_quits(site) -> None:
    lines: list[str] = []
    mps.prolog(site, 11, mps_job(1000), lines.append)
    mps.prolog(site, 12, mps_job(1000), lines.append)
    assert calls(site) == ["daemon CUDA_VISIBLE_DEVICES=2", "start_server -uid 1000"]
    mps.epilog(site, 11, {}, lines.append)
    assert "quit" not in calls(site)
    mps.epilog(site, 12, {}, lines.append)
    assert calls(site)[-1] == "quit" and not (site.mps_control.parent / "daemon").exists()
    assert any("daemon quit" in line for line in lines)


def test_a_second_user_is_told_that_mps_serves_one_user_at_a_time(site) -> None:
    lines: list[str] = []
    mps.prolog(site, 11, mps_job(1000), lines.append)
    mps.prolog(site, 12, mps_job(1001), lines.append)
    assert "start_server -uid 1001" not in calls(site)
    assert "serves uid 1000; uid 1001's clients wait" in lines[-1]


def test_jobs_without_mps_and_sites_without_it_are_left_alone(site) -> None:
    mps.prolog(site, 11, {"CUDA_VISIBLE_DEVICES": "0", "SLURM_JOB_UID": "1000"}, print)  # a whole GPU
    mps.prolog(dataclasses.replace(site, mps_control=None), 12, mps_job(1000), print)
    mps.epilog(site, 11, {}, print)
    assert calls(site) == []


@pytest.mark.parametrize("fault", ["fail-start", "missing", "hang"])
def test_a_failing_daemon_is_a_log_line_and_the_hooks_exit_0(site, fault, monkeypatch) -> None:
    monkeypatch.setattr(mps, "TIMEOUT_S", 0.5)
    folder = site.mps_control.parent
    if fault == "missing":
        site.mps_control.unlink()
    else:
        (folder / fault).touch()
    environ = {**mps_job(1000), "SLURM_JOB_ID": "11", "SLURM_GREEN_STATE_DIR": str(site.state_dir),
               "SLURM_GREEN_GPU_BACKEND": "none", "SLURM_GREEN_MPS_CONTROL": str(site.mps_control),
               "SLURM_GREEN_GPU_CONF": str(folder / "absent.conf")}
    began = time.monotonic()
    assert prolog.main(environ) == 0 and epilog.main(environ) == 0
    assert time.monotonic() - began < 5 * mps.TIMEOUT_S + 2
    assert not (folder / "daemon").exists() and not (site.state_dir / "mps" / "11").exists()


def test_a_failed_start_logs_why(site) -> None:
    (site.mps_control.parent / "fail-start").touch()
    lines: list[str] = []
    mps.prolog(site, 11, mps_job(1000), lines.append)
    assert lines == [f"mps: {site.mps_control} -d failed: cannot start the daemon"]
