"""Decisions to watts, and the rule for GPUs shared by several jobs."""

from __future__ import annotations

import pytest

from slurm_green.core import decision_token
from slurm_green.gpu import claims as claims_module
from slurm_green.gpu.claims import ClaimStore
from slurm_green.gpu.emulated import EmulatedBackend
from slurm_green.gpu.enact import apply_caps, decided_cap, job_gpus, restore_caps

KEY = b"site-key-of-32-bytes-for-tests!!"


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "decision.key"
    path.write_bytes(KEY + b"\n")
    return path


@pytest.fixture
def node(tmp_path):
    return EmulatedBackend(tmp_path / "gpus.json"), ClaimStore(tmp_path / "jobs")


@pytest.mark.parametrize(("text", "minors"), [("0,1", [0, 1]), ("3", [3]), ("0-2,5", [0, 1, 2, 5]), ("", []), (None, [])])
def test_job_gpus(text, minors) -> None:
    assert job_gpus(text) == minors


def test_signed_cap_for_this_job_is_used(key_file) -> None:
    token = decision_token.sign(KEY, 42, {"cap": 0.7, "start": 1})
    assert decided_cap(f"green:flex=1h {token}", 42, key_file, 0.9, print) == 0.7


def test_signed_decision_without_cap_means_no_cap(key_file) -> None:
    assert decided_cap(decision_token.sign(KEY, 42, {"gpus": 2}), 42, key_file, 0.9, print) is None


@pytest.mark.parametrize(
    ("comment", "why"),
    [
        ("no token here", "no decision token"),
        (decision_token.sign(b"another-key-of-sufficient-length", 42, {"cap": 0.2}), "not signed for job 42"),
        (decision_token.sign(KEY, 41, {"cap": 0.2}), "not signed for job 42"),  # another job's token
        (decision_token.sign(KEY, 42, {"cap": 7}), "not a fraction"),
        (decision_token.sign(KEY, 42, {"cap": "0.5"}), "not a fraction"),
    ],
)
def test_anything_but_a_valid_decision_gets_the_site_default(key_file, comment: str, why: str) -> None:
    lines: list[str] = []
    assert decided_cap(comment, 42, key_file, 0.9, lines.append) == 0.9
    assert why in lines[0]


def test_missing_key_file_gets_the_site_default(tmp_path) -> None:
    lines: list[str] = []
    token = decision_token.sign(KEY, 42, {"cap": 0.2})
    assert decided_cap(token, 42, tmp_path / "absent.key", None, lines.append) is None
    assert "ignored" in lines[0]


def test_cap_then_restore_exactly_the_jobs_gpus(node) -> None:
    backend, store = node
    backend.set_limit(2, 350)  # an earlier, non-default limit is what comes back
    lines: list[str] = []
    apply_caps(backend, store, 7, [1, 2], 0.5, lines.append)
    assert [backend.limits(m).current_w for m in range(4)] == [400, 200, 200, 400]
    assert "gpu 2: 350 W -> 200 W" in "\n".join(lines)
    restore_caps(backend, store, 7, "node1", lines.append)
    assert [backend.limits(m).current_w for m in range(4)] == [400, 400, 350, 400]
    assert store.load(7) is None


def test_shared_gpu_runs_at_the_loosest_wish_and_the_last_job_restores(node) -> None:
    backend, store = node
    apply_caps(backend, store, 1, [0], 0.5, print)   # 200 W
    apply_caps(backend, store, 2, [0], 0.6, print)   # 240 W: looser wins
    assert backend.limits(0).current_w == 240
    apply_caps(backend, store, 3, [0], 0.3, print)   # 120 W does not tighten it
    assert backend.limits(0).current_w == 240
    restore_caps(backend, store, 2, "node1", print)            # jobs 1 and 3 remain: 200 W
    assert backend.limits(0).current_w == 200
    restore_caps(backend, store, 1, "node1", print)
    assert backend.limits(0).current_w == 120
    restore_caps(backend, store, 3, "node1", print)            # last one: the baseline
    assert backend.limits(0).current_w == 400


def test_uncapped_job_lifts_a_shared_gpu_to_its_baseline(node) -> None:
    backend, store = node
    apply_caps(backend, store, 1, [3], 0.5, print)
    apply_caps(backend, store, 2, [3], None, print)
    assert backend.limits(3).current_w == 400
    restore_caps(backend, store, 2, "node1", print)
    assert backend.limits(3).current_w == 200


def test_requeued_job_replaces_its_own_record(node) -> None:
    backend, store = node
    apply_caps(backend, store, 5, [0], 0.5, print)
    apply_caps(backend, store, 5, [0], 0.8, print)  # Prolog again for the same job id
    assert backend.limits(0).current_w == 320
    restore_caps(backend, store, 5, "node1", print)
    assert backend.limits(0).current_w == 400  # the limit from before the first run


def test_records_of_an_earlier_boot_are_dropped(node, monkeypatch) -> None:
    backend, store = node
    monkeypatch.setattr(claims_module, "boot_id", lambda: "boot-1")
    apply_caps(backend, store, 1, [0], 0.5, print)
    monkeypatch.setattr(claims_module, "boot_id", lambda: "boot-2")
    apply_caps(backend, store, 2, [0], 0.6, print)
    restore_caps(backend, store, 2, "node1", print)
    assert store.load(1) is None
    assert backend.limits(0).current_w == 200  # job 2's baseline: what it found


def test_gpu_error_on_one_gpu_leaves_the_others_capped(node, fake_nvml, gpus) -> None:
    from slurm_green.gpu.nvml import NvmlBackend

    _, store = node
    backend = NvmlBackend()
    gpus[1].fail_set = True  # minor 0
    lines: list[str] = []
    apply_caps(backend, store, 9, [0, 1], 0.8, lines.append)
    assert "gpu 0: error" in "\n".join(lines)
    assert backend.limits(0).current_w == 350
    assert backend.limits(1).current_w == 200


def test_energy_of_a_gpu_shared_at_any_moment_is_marked_shared(node) -> None:
    backend, store = node
    apply_caps(backend, store, 1, [0], 0.5, print)
    apply_caps(backend, store, 2, [0], 0.6, print)  # joins job 1 on GPU 0, then leaves first
    second = restore_caps(backend, store, 2, "node1", print)
    first = restore_caps(backend, store, 1, "node1", print)  # alone at both its ends, not in between
    apply_caps(backend, store, 3, [1, 2], 0.5, print)
    alone = restore_caps(backend, store, 3, "node1", print)
    assert second is not None and second.shared
    assert first is not None and first.shared
    assert alone is not None and not alone.shared and alone.gpus == 2 and alone.node == "node1"
    assert alone.energy_j >= 0 and alone.seconds >= 0
