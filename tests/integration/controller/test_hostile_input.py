"""What users write into their jobs cannot stop the controller or smuggle a start past a
decision (issue 11: a comment with a byte that is not UTF-8 failed every tick; a comment
near Slurm's 1,024-character limit got its job started without the decided cap)."""

from __future__ import annotations

import time

import pytest
from cluster import CLUSTER_SCRIPT, Cluster
from controller_site import prepare, slurm_times, store_rows, write_carbon, write_config
from raw_bytes import Submission, read_back, sbatch_raw

from slurm_green.core import decision_token

pytestmark = [pytest.mark.integration, pytest.mark.contract]

GPU_JOB = ("-t", "5", "--gres=gpu:1")


@pytest.fixture(scope="module")
def site(cluster: Cluster) -> Cluster:
    prepare(cluster)
    return cluster


def run_once(c: Cluster, config: str) -> int:
    return c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen",
                  check=False, timeout=120).returncode


def comment_bytes(c: Cluster, job: int) -> bytes:
    return read_back(c, [job])[job][0].strip()


def test_bytes_that_are_not_utf8_in_comments_and_names_stop_nothing(site: Cluster) -> None:
    c = site
    window = time.time() + 3 * 3600
    config = write_config(write_carbon(window, window + 3600), "bytes")
    [odd] = sbatch_raw(c, "alice", [Submission(b"green:flex=6h caf\xe9", b"odd")], GPU_JOB)
    [named] = sbatch_raw(c, "bob", [Submission(b"green:flex=6h", b"\xff\xfe")], GPU_JOB)
    odd, named = odd.job_id, named.job_id
    plain = c.sbatch("alice", ["--gres=gpu:1", "-t", "5", "--comment", "green:flex=6h"], "sleep 1\n")
    assert run_once(c, config) == 0
    key = decision_token.load_key(CLUSTER_SCRIPT.parent / ".build" / "decision.key")
    for job in (odd, named, plain):  # every job decided, the odd ones too
        assert abs(slurm_times(c, job)["eligible"] - window) < 61, job
        words = comment_bytes(c, job).split()
        assert decision_token.verify(key, job, words[-1].decode()) == {"cap": 0.7}, job
    assert comment_bytes(c, odd).split()[:-1] == [b"green:flex=6h", b"caf\xe9"]  # the user's bytes, unchanged
    [[name]] = store_rows(c, "bytes", f"SELECT name FROM jobs WHERE job_id = {named}")
    assert name == "\\xff\\xfe"


def test_a_decision_slurm_refuses_is_never_half_enacted(site: Cluster) -> None:
    """Comment + token past 1,024 characters: Slurm refuses the token, so the start must not go."""
    c = site
    now = time.time()
    config = write_config(write_carbon(now - 3600, now + 3600), "long")
    comment = "green:flex=10m,cap=yes " + "w" * 1000
    job = c.sbatch("alice", ["--gres=gpu:1", "-t", "5", "--comment", comment], "sleep 1\n")
    deadline = slurm_times(c, job)["submit"] + 600
    assert run_once(c, config) != 0  # an action failed: said in the exit status
    assert c.job_state(job) == "PENDING" and abs(slurm_times(c, job)["eligible"] - deadline) <= 1
    assert comment_bytes(c, job).decode() == comment  # the user's words, untouched
    rows = store_rows(c, "long", f"SELECT kind, ok, error FROM actions WHERE job_id = {job} ORDER BY id")
    assert rows[0][:2] == ["SetDecision", 0] and rows[-1] == ["SetStartTime", 0, "blocked"], rows
