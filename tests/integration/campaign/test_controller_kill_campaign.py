"""The controller SIGKILLed at 100 random points of its ticks, under a growing queue of
managed jobs (issue 11's campaign): jobs started after their deadline, actions lost and
actions doubled must all be 0.

Each round submits a few managed jobs, so every tick has work (decision tokens, starts),
starts ``slurm-green run --once`` and kills it after a random delay drawn over the whole
length of a run (interpreter start, snapshot, decisions, enactment, records). After the
last round one run is let finish; then every job must carry exactly the decision the
policy makes for it, each decision once in the store, each action succeeded at most once,
and no job eligible after its deadline.
"""

from __future__ import annotations

import random
import time

from cluster import CLUSTER_SCRIPT, Cluster
from controller_site import STATE, prepare, slurm_times, store_rows, write_carbon, write_config

from slurm_green.core import decision_token

ROUNDS = 100
JOBS_PER_ROUND = 3
USER_WORDS = "green:flex=6h,cap=yes"


def run_killed_after(c: Cluster, config: str, delay_s: float) -> bool:
    """Start a one-tick run and SIGKILL it after ``delay_s``; True if it was still running."""
    c.sh("controller", f"nohup slurm-green run --once --config {config} >> {STATE}/kill.log 2>&1 &", user="sgreen")
    time.sleep(delay_s)
    alive = c.exec("controller", "pkill", "-KILL", "-f", "slurm-green run", check=False).returncode == 0
    c.wait_for(lambda: c.exec("controller", "pgrep", "-f", "slurm-green run", check=False).returncode != 0, 30,
               message="killed run gone")
    return alive


def test_controller_killed_at_random_points(cluster: Cluster) -> None:
    c = cluster
    prepare(c)
    window = time.time() + 3 * 3600
    config = write_config(write_carbon(window, window + 3600), "kill")
    rng = random.Random(11)
    jobs: list[int] = []
    killed_alive = 0
    t0 = time.monotonic()
    try:
        for _ in range(ROUNDS):
            jobs += [c.sbatch("alice", ["--gres=gpu:1", "-t", "10", "--comment", USER_WORDS], "sleep 1\n")
                     for _ in range(JOBS_PER_ROUND)]
            killed_alive += run_killed_after(c, config, rng.uniform(0.5, 4.0))
        interrupted = len(store_rows(c, "kill", "SELECT id FROM actions WHERE error = 'unknown'"))
        assert c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen",
                      timeout=300).returncode == 0
        key = decision_token.load_key(CLUSTER_SCRIPT.parent / ".build" / "decision.key")
        late = lost = doubled_words = 0
        for job in jobs:
            times = slurm_times(c, job)
            late += times["eligible"] > times["submit"] + 6 * 3600 + 1
            comment = c.exec("controller", "squeue", "-h", "-j", str(job), "-o", "%k").stdout.split()
            doubled_words += comment[:-1] != [USER_WORDS]
            try:
                in_force = decision_token.verify(key, job, comment[-1]) == {"cap": 0.7}
            except decision_token.InvalidToken:
                in_force = False
            lost += not in_force or abs(times["eligible"] - window) >= 61
        decided_twice = store_rows(c, "kill", "SELECT job_id FROM decisions GROUP BY job_id HAVING COUNT(*) > 1")
        done_twice = store_rows(c, "kill", "SELECT job_id, kind FROM actions WHERE ok = 1"
                                           " GROUP BY job_id, kind HAVING COUNT(*) > 1")
        print(f"\n[kill campaign] Slurm {c.version}: {ROUNDS} SIGKILLs ({killed_alive} while the run was alive), "
              f"{len(jobs)} managed jobs, {time.monotonic() - t0:.0f} s\n"
              f"  actions interrupted between intent and outcome (audit trail 'unknown'): {interrupted}\n"
              f"  jobs eligible after their deadline: {late}\n"
              f"  decisions lost (not in force after one clean tick): {lost}\n"
              f"  decisions stored twice: {len(decided_twice)}; actions done twice: {len(done_twice)}; "
              f"user words doubled: {doubled_words}")
        assert (late, lost, len(decided_twice), len(done_twice), doubled_words) == (0, 0, 0, 0, 0)
    finally:
        for job in jobs:
            c.exec("controller", "scancel", str(job), check=False)
