"""The emulated backend: a locked JSON state file with A100-like boards."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from slurm_green.gpu.emulated import EmulatedBackend
from slurm_green.gpu.power import BoardLimits, GpuError


def test_absent_file_is_created_with_a100_like_boards(tmp_path) -> None:
    path = tmp_path / "state" / "gpus.json"
    assert EmulatedBackend(path).limits(3) == BoardLimits(100, 400, 400, 400)
    assert json.loads(path.read_text())["devices"]["3"]["max_w"] == 400


def test_limits_persist_across_instances(tmp_path) -> None:
    path = tmp_path / "gpus.json"
    EmulatedBackend(path).set_limit(1, 250)
    assert EmulatedBackend(path).limits(1).current_w == 250
    assert EmulatedBackend(path).limits(0).current_w == 400


@pytest.mark.parametrize("watts", [99, 401])
def test_limits_outside_the_board_range_are_refused(tmp_path, watts: float) -> None:
    with pytest.raises(GpuError):
        EmulatedBackend(tmp_path / "gpus.json").set_limit(0, watts)


def test_fail_flag_rehearses_a_gpu_error(tmp_path) -> None:
    path = tmp_path / "gpus.json"
    backend = EmulatedBackend(path)
    backend.limits(2)
    state = json.loads(path.read_text())
    state["devices"]["2"]["fail"] = True
    path.write_text(json.dumps(state))
    with pytest.raises(GpuError, match="emulated failure"):
        backend.set_limit(2, 200)
    assert backend.limits(2).current_w == 400


def test_energy_integrates_the_limit_over_time(tmp_path) -> None:
    now = [1000.0]
    backend = EmulatedBackend(tmp_path / "gpus.json", clock=lambda: now[0])
    backend.set_limit(0, 200)
    now[0] += 10
    assert backend.energy_j(0) == 2000


def _hammer(path: str, minor: int) -> None:
    backend = EmulatedBackend(path)
    for watts in range(101, 141):
        backend.set_limit(minor, watts)


def test_concurrent_writers_do_not_lose_updates(tmp_path) -> None:
    path = str(tmp_path / "gpus.json")
    workers = [multiprocessing.Process(target=_hammer, args=(path, minor)) for minor in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert [EmulatedBackend(path).limits(minor).current_w for minor in range(3)] == [140, 140, 140]


def test_fail_read_flag_rehearses_a_gpu_that_cannot_be_read(tmp_path) -> None:
    path = tmp_path / "gpus.json"
    backend = EmulatedBackend(path)
    backend.limits(1)
    state = json.loads(path.read_text())
    state["devices"]["1"]["fail_read"] = True
    path.write_text(json.dumps(state))
    for call in (lambda: backend.limits(1), lambda: backend.energy_j(1)):
        with pytest.raises(GpuError, match="emulated read failure"):
            call()
    assert backend.limits(0).current_w == 400  # the other boards answer
