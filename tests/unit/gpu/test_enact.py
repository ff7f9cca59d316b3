"""Decisions to watts, and the rule for GPUs shared by several jobs."""

from __future__ import annotations

import os

import pytest

from slurm_green.core import decision_token
from slurm_green.gpu import claims as claims_module
from slurm_green.gpu.claims import ClaimStore
from slurm_green.gpu.emulated import EmulatedBackend
from slurm_green.gpu.enact import apply_caps, array_job_of, decided_cap, job_gpus, restore_caps
from slurm_green.gpu.power import GpuError

KEY = b"site-key-of-32-bytes-for-tests!!"


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "decision.key"
    path.write_bytes(KEY + b"\n")
    path.chmod(0o600)  # a key every user could read is refused
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


@pytest.mark.timeout(20)
def test_a_key_path_that_is_a_fifo_gets_the_site_default_at_once(tmp_path) -> None:
    """A FIFO as the key would block every Prolog until a writer came (and Slurm drains a node whose
    Prolog outlives PrologTimeout): the job starts under the site default instead."""
    fifo = tmp_path / "decision.key"
    os.mkfifo(fifo, 0o600)
    lines: list[str] = []
    token = decision_token.sign(KEY, 42, {"cap": 0.2})
    assert decided_cap(token, 42, fifo, 0.9, lines.append) == 0.9
    assert "not a regular file" in lines[0]


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


def test_a_cap_never_raises_a_gpu_above_the_limit_the_site_set(node) -> None:
    """The site runs a 400 W board at 300 W: cap 0.9 (360 W) is no cap there, and a shared GPU
    stays at 300 W whoever asks for less or nothing; restored, it is at 300 W again."""
    backend, store = node
    backend.set_limit(0, 300)
    apply_caps(backend, store, 1, [0], 0.9, print)
    assert backend.limits(0).current_w == 300
    apply_caps(backend, store, 2, [0], 0.5, print)
    assert backend.limits(0).current_w == 300  # the looser wish, which is the baseline
    restore_caps(backend, store, 1, "node1", print)
    assert backend.limits(0).current_w == 200
    restore_caps(backend, store, 2, "node1", print)
    assert backend.limits(0).current_w == 300


def test_requeued_job_replaces_its_own_record(node) -> None:
    backend, store = node
    apply_caps(backend, store, 5, [0], 0.5, print)
    apply_caps(backend, store, 5, [0], 0.8, print)  # Prolog again for the same job id
    assert backend.limits(0).current_w == 320
    restore_caps(backend, store, 5, "node1", print)
    assert backend.limits(0).current_w == 400  # the limit from before the first run


def test_a_run_requeued_after_an_epilog_that_died_keeps_its_cap_and_record(node) -> None:
    """Run 1's Epilog was killed (its wrapper marked job 5 ended); run 2 starts on this node:
    the next hook of another job must not take run 1's marker for run 2's and release it."""
    backend, store = node
    apply_caps(backend, store, 5, [0], 0.5, print)
    (store.dir / "5.ended").write_text("wrapper\n")
    apply_caps(backend, store, 5, [0], 0.5, print)  # run 2
    apply_caps(backend, store, 6, [1], None, print)  # another job's Prolog heals the node
    assert backend.limits(0).current_w == 200
    assert store.load(5) is not None
    restore_caps(backend, store, 5, "node1", print)
    assert backend.limits(0).current_w == 400


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


@pytest.mark.parametrize(
    ("signed_for", "array", "accepted"),
    [
        (20, 20, True),     # a task of array 20, token signed for the array
        (22, 20, True),     # the task's own id still works
        (20, None, False),  # not an array task: only its own id
        (30, 20, False),    # another array's token
        (21, 20, False),    # a sibling task's own token
    ],
)
def test_array_tasks_accept_their_arrays_token_and_nothing_else(key_file, signed_for, array, accepted) -> None:
    asked: list[int] = []

    def array_of(job: int) -> int | None:
        asked.append(job)
        return array

    lines: list[str] = []
    cap = decided_cap(decision_token.sign(KEY, signed_for, {"cap": 0.6}), 22, key_file, None, lines.append, array_of)
    assert cap == (0.6 if accepted else None)
    assert accepted or "decision token ignored" in lines[0]
    assert asked == ([] if signed_for == 22 else [22])  # slurmctld is asked only when needed


@pytest.fixture
def scontrol(tmp_path, monkeypatch):
    """A fake ``scontrol`` first on PATH (slurmctld is the outer edge here); returns a setter."""
    path = tmp_path / "bin" / "scontrol"
    path.parent.mkdir()
    monkeypatch.setenv("PATH", f"{path.parent}:/usr/bin:/bin")

    def answer(body: str) -> None:
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)

    return answer


@pytest.mark.parametrize(
    ("body", "array"),
    [
        ("echo 'JobId=22 ArrayJobId=20 ArrayTaskId=1 JobName=train UserId=alice(2001)'", 20),
        ("echo 'JobId=22 JobName=x ArrayJobId=20 ArrayTaskId=1 UserId=alice(2001)'", None),  # user text
        ("echo 'JobId=22 JobName=train UserId=alice(2001)'", None),                         # not an array
        ("echo 'JobId=23 ArrayJobId=20 ArrayTaskId=1 JobName=train'", None),                # another job
        ("echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1", None),
        ("printf 'JobId=22 ArrayJobId=20 ArrayTaskId=1 JobName=caf\\351 \\n'", 20),           # not UTF-8
    ],
)
def test_array_job_of_reads_slurmctlds_answer_and_nothing_a_user_wrote(scontrol, body, array) -> None:
    scontrol(body)
    assert array_job_of(22, print) == array


def test_array_job_of_gives_up_on_a_slow_or_missing_scontrol(scontrol, monkeypatch) -> None:
    scontrol("sleep 10")
    lines: list[str] = []
    assert array_job_of(22, lines.append, timeout_s=0.5) is None
    assert "could not ask slurmctld" in lines[0]
    monkeypatch.setenv("PATH", "/nonexistent")
    assert array_job_of(22, lines.append) is None and len(lines) == 2


@pytest.mark.parametrize("damage", ["remove", "corrupt"])
def test_epilog_without_a_readable_record_restores_from_the_kept_baselines(node, damage) -> None:
    backend, store = node
    backend.set_limit(1, 350)
    apply_caps(backend, store, 7, [1, 2], 0.5, print)
    path = store.dir / "7.json"
    path.unlink() if damage == "remove" else path.write_text("{not json")
    lines: list[str] = []
    assert restore_caps(backend, store, 7, "node1", lines.append, [1, 2]) is None  # no energy without a record
    assert [backend.limits(m).current_w for m in range(4)] == [400, 350, 400, 400]
    assert "gpu 1: 200 W -> 350 W (restored: no job holds it)" in lines
    assert store.baselines() == {} and not list(store.dir.glob("7.*"))


def test_a_lost_record_on_a_shared_gpu_leaves_the_other_jobs_wish(node) -> None:
    backend, store = node
    apply_caps(backend, store, 1, [0], 0.6, print)
    apply_caps(backend, store, 2, [0], None, print)  # uncapped: the GPU runs at 400 W
    (store.dir / "2.json").unlink()
    lines: list[str] = []
    restore_caps(backend, store, 2, "node1", lines.append, [0])
    assert backend.limits(0).current_w == 240  # back to job 1's wish, not left at job 2's
    assert "restoring GPUs [0] from the kept baselines" in lines[0]
    restore_caps(backend, store, 1, "node1", print, [0])
    assert backend.limits(0).current_w == 400


def test_an_epilog_that_died_is_cleaned_up_by_the_next_hook(node) -> None:
    backend, store = node
    apply_caps(backend, store, 7, [0, 1], 0.5, print)
    (store.dir / "7.ended").write_text("999999999")  # marked ended by a process that is gone
    lines: list[str] = []
    apply_caps(backend, store, 8, [2], 0.5, lines.append)  # another job's Prolog
    assert [backend.limits(m).current_w for m in range(4)] == [400, 400, 200, 400]
    assert "job 7: its Epilog died" in lines[0] and store.load(7) is None
    assert store.baselines() == {2: 400}


def test_an_epilog_still_at_work_is_not_cleaned_up(node) -> None:
    backend, store = node
    apply_caps(backend, store, 7, [0], 0.5, print)
    store.mark_ended(7)  # this process: alive
    apply_caps(backend, store, 8, [2], 0.5, print)
    assert backend.limits(0).current_w == 200 and store.load(7) is not None


def test_a_gpu_that_refused_its_restore_gets_it_at_the_next_hook(node) -> None:
    backend, store = node
    apply_caps(backend, store, 7, [0], 0.5, print)
    _set_fault(backend, 0, fail=True)
    restore_caps(backend, store, 7, "node1", print)
    assert backend.limits(0).current_w == 200 and store.baselines() == {0: 400}
    _set_fault(backend, 0, fail=False)
    lines: list[str] = []
    apply_caps(backend, store, 8, [3], None, lines.append)  # any later hook heals it
    assert backend.limits(0).current_w == 400 and "(restored: no job holds it)" in lines[0]
    assert store.baselines() == {3: 400}


def test_the_next_job_on_a_gpu_that_refused_its_restore_keeps_the_true_baseline(node) -> None:
    backend, store = node
    apply_caps(backend, store, 7, [0], 0.5, print)
    _set_fault(backend, 0, fail=True)
    restore_caps(backend, store, 7, "node1", print)
    apply_caps(backend, store, 8, [0], 0.6, print)  # still refusing: 200 W stays, baseline 400 W kept
    _set_fault(backend, 0, fail=False)
    restore_caps(backend, store, 8, "node1", print)
    assert backend.limits(0).current_w == 400


def _set_fault(backend: EmulatedBackend, minor: int, **switches: bool) -> None:
    import json

    state = json.loads(backend.path.read_text())
    state["devices"][str(minor)].update(switches)
    backend.path.write_text(json.dumps(state))


def test_the_energy_record_carries_the_boards_limits_for_the_models(node, tmp_path) -> None:
    """What the Epilog's NVML knows (min/max/default W) reaches the controller with the energy."""
    from slurm_green.core import telemetry

    backend, store = node
    apply_caps(backend, store, 4, [0, 1], 0.5, print)
    measured = restore_caps(backend, store, 4, "node1", print)
    limits = backend.limits(0)
    assert measured is not None
    assert (measured.board_min_w, measured.board_max_w, measured.board_default_w) == (
        limits.min_w, limits.max_w, limits.default_w)
    again = telemetry.read(telemetry.write(tmp_path / "spool", measured))
    assert again == measured
    older = telemetry.NodeEnergy(4, "node1", 2, 10.0, 1.0)  # an Epilog from before: no board
    assert telemetry.read(telemetry.write(tmp_path / "old", older)).board_max_w is None
    with pytest.raises(ValueError, match="not a board"):
        telemetry.NodeEnergy(4, "node1", 2, 10.0, 1.0, board_min_w=300.0, board_max_w=200.0, board_default_w=250.0)


def test_energy_of_a_shared_gpu_is_split_by_time_overlap_and_adds_up(tmp_path) -> None:
    """Emulated boards draw their limit: 200 W (cap 0.5 of 400 W) from t=0 to t=40 is 8000 J on the
    counter. Job 1 holds the GPU alone for 0-10 and 30-40, with job 2 for 10-30: equal halves there."""
    now = [1000.0]
    backend, store = EmulatedBackend(tmp_path / "gpus.json", clock=lambda: now[0]), ClaimStore(tmp_path / "jobs")
    apply_caps(backend, store, 1, [0], 0.5, print)
    now[0] += 10
    apply_caps(backend, store, 2, [0], 0.5, print)
    now[0] += 20
    second = restore_caps(backend, store, 2, "node1", print)
    now[0] += 10
    first = restore_caps(backend, store, 1, "node1", print)
    assert second is not None and first is not None and first.shared and second.shared
    assert second.energy_j == pytest.approx(20 * 200 / 2)
    assert first.energy_j == pytest.approx(10 * 200 + 20 * 200 / 2 + 10 * 200)
    assert first.energy_j + second.energy_j == pytest.approx(backend.energy_j(0))


class CounterFails(EmulatedBackend):
    """An emulated board whose energy counter fails while ``broken``; its limits still work."""

    broken = False

    def energy_j(self, minor: int) -> float | None:
        if self.broken:
            raise GpuError("counter unreadable")
        return super().energy_j(minor)


def test_a_counter_unreadable_while_shared_leaves_every_holder_without_energy(tmp_path) -> None:
    backend, store = CounterFails(tmp_path / "gpus.json"), ClaimStore(tmp_path / "jobs")
    apply_caps(backend, store, 1, [0], 0.5, print)
    backend.broken = True
    apply_caps(backend, store, 2, [0], 0.5, print)  # the counter fails as job 2 joins: job 1's part is lost
    backend.broken = False
    apply_caps(backend, store, 3, [1], 0.5, print)
    assert restore_caps(backend, store, 2, "node1", print) is None
    assert restore_caps(backend, store, 1, "node1", print) is None
    assert restore_caps(backend, store, 3, "node1", print) is not None  # another GPU: unaffected
