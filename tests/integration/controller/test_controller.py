"""The controller end to end on the Docker cluster: `slurm-green run` as the operator
user sgreen, against a synthetic carbon series with a low-carbon window a minute or two
ahead, with job_submit.lua and the Prolog/Epilog active.

These are the acceptance tests of the enactment path: jobs start in the window and not
before, unmarked jobs start at once, the fallback start holds with the controller
stopped, a killed controller neither loses nor repeats an action, and a runtime error
inside job_submit.lua still lets the job in.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import time

import pytest
from cluster import CLUSTER_SCRIPT, Cluster
from controller_site import (DONE, HOST_DIR, INTERVAL_S, LOW, STATE, prepare, run_once, slurm_times, start_controller,
                             state_of, stop_controller, store_rows, write_carbon, write_config)

from slurm_green.core import decision_token
from slurm_green.core.cluster import Job
from slurm_green.core.green_options import parse_marker
from slurm_green.slurm import schema

pytestmark = [pytest.mark.integration, pytest.mark.contract]

def seen_job(c: Cluster, job_id: int) -> Job:
    """The job as the controller's CLI backend reads it (``squeue --json``, any version's shape)."""
    [raw] = [j for j in c.squeue("-j", str(job_id)) if j["job_id"] == job_id]
    return schema.parse_job(raw)


@pytest.fixture(scope="module")
def controller_site(cluster: Cluster):
    prepare(cluster)
    yield cluster
    stop_controller(cluster, "KILL")


def test_green_job_starts_in_the_low_carbon_window_and_unmarked_job_at_once(controller_site: Cluster) -> None:
    c = controller_site
    window_start = time.time() + 75
    config = write_config(write_carbon(window_start, window_start + 600), "window")
    start_controller(c, config)
    try:
        green = c.sbatch("alice", ["--gres=gpu:1", "-t", "3", "--comment", "green:flex=20m"], "sleep 20\n")
        unmarked = c.sbatch("bob", ["--gres=gpu:1", "-t", "3"], "sleep 20\n")
        state_of(c, unmarked, {"RUNNING", *DONE}, 20)
        # the controller moves the green job from its fallback (deadline) to the window
        boundary = (window_start // 60 + 1) * 60  # the series' first low minute
        fallback = slurm_times(c, green)["submit"] + 20 * 60
        eligible = c.wait_for(lambda: (e := slurm_times(c, green)["eligible"]) != fallback and e, 30,
                              message="green job's StartTime moved by the controller")
        decisions = store_rows(c, "window", "SELECT decided_at, start_at, reason FROM decisions")
        assert eligible == boundary, (window_start, decisions)
        assert c.job_state(green) == "PENDING"
        state_of(c, green, {"RUNNING", *DONE}, boundary - time.time() + INTERVAL_S + 30)
        started = slurm_times(c, green)["start"]
        assert started is not None
        # not before the window, and within one tick plus slurmctld's scheduling interval
        # (5 s here) after it
        assert boundary - 1 <= started <= boundary + INTERVAL_S + 15, (started, boundary)
        [reason] = store_rows(c, "window", f"SELECT reason FROM decisions WHERE job_id = {green}")
        assert reason[0].startswith("deferred")
        # its run is accounted at the intensity of the minutes it ran: the low window's
        state_of(c, green, DONE, 60)
        query = f"SELECT energy_kwh, carbon_kg, accounted_until FROM jobs WHERE job_id = {green}"
        c.wait_for(lambda: store_rows(c, "window", query)[0][2] == slurm_times(c, green)["end"], 30,
                   message="run accounted up to the job's end")
        [(kwh, kg, _)] = store_rows(c, "window", query)
        assert kwh > 0 and kg == pytest.approx(kwh * LOW / 1000.0)
    finally:
        stop_controller(c)


def test_a_second_controller_on_the_same_store_is_refused(controller_site: Cluster) -> None:
    """The install steps' `run --once` check, repeated while the service runs, is refused at once
    (two controllers would both enact every tick); once the service stops, it runs."""
    c = controller_site
    config = write_config(write_carbon(time.time() + 3600, time.time() + 4200), "single")
    start_controller(c, config)
    try:
        held = c.wait_for(lambda: c.exec("controller", "cat", f"{STATE}/single.lock", check=False).stdout, 30,
                          message="the service's lock record")
        second = c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen", check=False)
        assert second.returncode == 1, second.stdout + second.stderr
        assert "another slurm-green controller is running on this state database" in second.stderr
        assert held.startswith("pid ") and f"by {held.strip()}" in second.stderr
    finally:
        stop_controller(c)
    c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen", timeout=120)


def test_with_the_controller_stopped_a_green_job_starts_by_its_deadline(controller_site: Cluster) -> None:
    c = controller_site
    job = c.sbatch("alice", ["--gres=gpu:1", "-t", "3", "--comment", "green:flex=1m"], "sleep 5\n")
    times = slurm_times(c, job)
    deadline = times["submit"] + 60
    assert abs(times["eligible"] - deadline) <= 1
    assert c.exec("controller", "squeue", "-h", "-j", str(job), "-o", "%r").stdout.strip() == "BeginTime"
    state_of(c, job, {"RUNNING", *DONE}, 90)
    assert deadline - 1 <= slurm_times(c, job)["start"] <= deadline + 15


def test_controller_killed_mid_tick_loses_and_repeats_nothing(controller_site: Cluster) -> None:
    c = controller_site
    window_start = time.time() + 3 * 3600
    config = write_config(write_carbon(window_start, window_start + 3600), "kill")
    jobs = [c.sbatch("alice", ["--gres=gpu:1", "-t", "10", "--comment", "green:flex=6h,cap=yes"], "sleep 1\n")
            for _ in range(30)]
    rng = random.Random(7)
    try:
        for _ in range(6):  # start, let it get somewhere into a tick, SIGKILL
            start_controller(c, config)
            time.sleep(rng.uniform(2.0, 6.0))
            stop_controller(c, "KILL")
        c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen", timeout=120)
        key = decision_token.load_key(CLUSTER_SCRIPT.parent / ".build" / "decision.key")
        for job in jobs:  # nothing lost: every decision is in force
            times = slurm_times(c, job)
            assert abs(times["eligible"] - window_start) < 61, job
            comment = c.exec("controller", "squeue", "-h", "-j", str(job), "-o", "%k").stdout.split()
            assert len(comment) == 2 and comment[0] == "green:flex=6h,cap=yes", comment  # the user's words, once
            assert decision_token.verify(key, job, comment[1]) == {"cap": 0.7}, job
        # each decision recorded once; no action done (and recorded) twice
        decisions = store_rows(c, "kill", "SELECT job_id, COUNT(*) FROM decisions GROUP BY job_id")
        assert dict(map(tuple, decisions)) == {job: 1 for job in jobs}
        repeated = store_rows(c, "kill", "SELECT job_id, kind, COUNT(*) FROM actions WHERE ok = 1"
                                         " GROUP BY job_id, kind HAVING COUNT(*) > 1")
        assert repeated == []
        last_tick = store_rows(c, "kill", "SELECT actions FROM ticks ORDER BY tick_at DESC LIMIT 1")
        assert last_tick == [[0]]  # the converged controller has nothing left to do
    finally:
        for job in jobs:
            c.exec("controller", "scancel", str(job), check=False)


def test_a_runtime_error_inside_job_submit_lua_lets_the_job_in(controller_site: Cluster) -> None:
    """A plugin that fails at run time (here: a site setting of the wrong type) lets jobs through."""
    c = controller_site
    installed = "/etc/slurm/job_submit.lua"
    # opt-out (unmarked GPU jobs managed), so that bob's unmarked job reads the broken setting
    c.sh("slurmctld", f"sed -i -e 's/^    default_flex_s = 0,/    default_flex_s = {{}},/' "
                      f"-e 's/^    manage_unmarked_gpu_jobs = false,/    manage_unmarked_gpu_jobs = true,/' {installed} && "
                      f"grep -q 'default_flex_s = {{}}' {installed} && grep -q 'manage_unmarked_gpu_jobs = true' {installed}")
    try:
        c.exec("slurmctld", "scontrol", "reconfigure")
        c.wait_for(lambda: c.exec("controller", "scontrol", "ping", check=False).returncode == 0, 60)
        job = c.sbatch("bob", ["--gres=gpu:1", "-t", "3"], "sleep 1\n")  # unmarked: reads default_flex_s
        state_of(c, job, {"RUNNING", *DONE}, 30)
        logs = subprocess.run(["docker", "logs", "--since", "2m", c.container("slurmctld")],
                              capture_output=True, text=True, timeout=60)
        assert "job_submit.lua submit failed, job let through" in logs.stdout + logs.stderr
    finally:
        c.sh("slurmctld", f"cp /opt/slurm-green/slurm_green/job_submit/job_submit.lua {installed}")
        c.exec("slurmctld", "scontrol", "reconfigure")
        c.wait_for(lambda: c.exec("controller", "scontrol", "ping", check=False).returncode == 0, 60)


def test_a_gpu_freq_site_gets_the_cap_as_tres_freq(controller_site: Cluster) -> None:
    """The window policy's 70 % cap, enacted as Slurm's GPU clock level, and the time limits
    raised with it (docs/enactment.md, "Time limits follow the decision")."""
    c = controller_site
    window_start = time.time() + 3 * 3600
    config = write_config(write_carbon(window_start, window_start + 3600), "freq", '[gpu]\nenact = "gpu_freq"\n')
    # bert: its model runs 1.17 x slower at 70 % on the cluster's (a40) GPUs. One job gives
    # --time, the other none: the partition's DefaultTime (1 hour here) applies.
    job = c.sbatch("alice", ["--gres=gpu:1", "-t", "10", "-J", "bert", "--comment", "green:flex=6h"], "sleep 1\n")
    untimed = c.sbatch("alice", ["--gres=gpu:1", "-J", "bert", "--comment", "green:flex=6h"], "sleep 1\n")
    assert seen_job(c, job).admin_comment.endswith(";limit=600")  # job_submit.lua kept the limit as submitted
    assert "limit=" not in seen_job(c, untimed).admin_comment and seen_job(c, untimed).time_limit_s == 3600
    c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen", timeout=120)
    [raw] = [j for j in c.squeue("-j", str(job)) if j["job_id"] == job]
    assert raw["tres_freq"] == "gpu:medium"  # the window policy's 70 % cap, as Slurm's nearest level above
    assert "sg1." not in raw["comment"]  # no cap token: the Prolog leaves power limits alone
    # The cap slows the jobs: the operator sgreen raised their limits, from 10 minutes and from
    # the hour the partition gave, before their start.
    for slowed, asked in ((job, 600), (untimed, 3600)):
        [(expected_s,)] = store_rows(c, "freq", f"SELECT expected_runtime_s FROM decisions WHERE job_id = {slowed}")
        raised = seen_job(c, slowed).time_limit_s
        assert 1.1 * asked < expected_s and raised == math.ceil(expected_s / 60 - 1e-9) * 60, (slowed, expected_s)
    c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen", timeout=120)
    for slowed in (job, untimed):  # once each: the second tick found them in force
        assert store_rows(c, "freq", f"SELECT kind FROM actions WHERE ok = 1 AND job_id = {slowed} ORDER BY id") == [
            ["SetGpuFreq"], ["SetTimeLimit"], ["SetStartTime"]]


def test_no_job_is_slowed_past_its_partitions_max_time(controller_site: Cluster) -> None:
    """The partition's MaxTime at 10 minutes: the window policy's 70 % cap (bert: 1.17 x slower)
    would need 12 of a job submitted with ``-t 10``, and its limit cannot pass MaxTime, so that
    job runs as asked (no cap, its limit kept, only its deferral enacted); one submitted with
    ``-t 5`` is capped and raised to 6 (docs/enactment.md, "Never past MaxTime")."""
    c = controller_site
    window_start = time.time() + 3 * 3600
    config = write_config(write_carbon(window_start, window_start + 3600), "maxtime")
    c.exec("controller", "scontrol", "update", "PartitionName=gpu", "MaxTime=10")
    jobs: list[int] = []
    try:
        for minutes in ("10", "5"):
            jobs.append(c.sbatch("alice", ["--gres=gpu:1", "-t", minutes, "-J", "bert", "--comment", "green:flex=6h"],
                                 "sleep 1\n"))
        full, short = jobs
        c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen", timeout=120)
        kinds = {job: [kind for (kind,) in store_rows(
            c, "maxtime", f"SELECT kind FROM actions WHERE ok = 1 AND job_id = {job} ORDER BY id")] for job in jobs}
        assert kinds == {full: ["SetStartTime"], short: ["SetDecision", "SetTimeLimit", "SetStartTime"]}, kinds
        assert (seen_job(c, full).time_limit_s, seen_job(c, short).time_limit_s) == (600, 360)
        [(cap, reason)] = store_rows(c, "maxtime", f"SELECT cap_fraction, reason FROM decisions WHERE job_id = {full}")
        assert cap is None and "MaxTime" in reason, (cap, reason)
    finally:
        c.exec("controller", "scontrol", "update", "PartitionName=gpu", "MaxTime=INFINITE")
        for job in jobs:
            c.exec("controller", "scancel", str(job), check=False)


def test_a_users_own_begin_is_never_moved_earlier(controller_site: Cluster) -> None:
    """``sbatch --begin=now+2hours``: job_submit.lua keeps that begin in the marker (``begin=``)
    and defers the job to begin + flex; with the low-carbon window open now, the controller
    releases the job submitted without ``--begin`` and leaves the other alone."""
    c = controller_site
    now = time.time()
    config = write_config(write_carbon(now - 3600, now + 3600), "begin")
    later = c.sbatch("alice", ["--gres=gpu:1", "-t", "5", "--begin=now+2hours", "--comment", "green:flex=6h"],
                     "sleep 1\n")
    control = c.sbatch("alice", ["--gres=gpu:1", "-t", "5", "--comment", "green:flex=6h"], "sleep 1\n")
    try:
        c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen", timeout=120)
        acted = store_rows(c, "begin", f"SELECT job_id, kind FROM actions WHERE ok = 1 AND job_id IN ({later}, {control})")
        assert [later, "SetStartTime"] not in acted and [control, "SetStartTime"] in acted, acted
        seen = seen_job(c, later)
        earliest = parse_marker(seen.admin_comment).earliest
        assert earliest is not None and abs(earliest - (now + 7200)) < 120, (earliest, now)
        assert seen.eligible_time is not None and seen.eligible_time >= earliest + 6 * 3600 - 1
    finally:
        for job in (later, control):
            c.exec("controller", "scancel", str(job), check=False)


def test_a_job_in_a_reservation_is_not_deferred_past_it(controller_site: Cluster) -> None:
    """A reservation's nodes wait for its jobs, and Slurm holds a job whose begin time is past
    its reservation's end once that ends (``RESV_DEL_HOLD``). So job_submit.lua does not defer a
    green job submitted to a reservation (before: to its deadline, 6 h on), and the controller
    releases one deferred anyway (as an older plugin did) instead of moving it to a cleaner hour
    3 h on, long after its 10-minute reservation; its cap is still decided, and it runs on the
    reservation's node once alice's other job there ends."""
    c = controller_site
    now = time.time()
    config = write_config(write_carbon(now + 3 * 3600, now + 4 * 3600), "reserved")
    c.exec("controller", "scontrol", "delete", "reservation=sg-resv", check=False)
    c.exec("controller", "scontrol", "create", "reservation", "reservationname=sg-resv", "starttime=now",
           "duration=10", "nodes=node2", "users=alice")
    jobs: list[int] = []
    try:
        jobs.append(c.sbatch("alice", ["--gres=gpu:4", "--reservation=sg-resv", "-t", "2", "--comment", "green:off"],
                             "sleep 40\n"))
        state_of(c, jobs[0], {"RUNNING"}, 30)
        jobs.append(green := c.sbatch("alice", ["--gres=gpu:1", "--reservation=sg-resv", "-t", "2", "--comment",
                                                "green:flex=6h"], "hostname\n"))
        seen = seen_job(c, green)
        assert seen.reservation == "sg-resv" and seen.is_pending, seen
        assert seen.eligible_time is not None and seen.eligible_time < time.time() + 60, (seen.eligible_time, now)
        c.exec("controller", "scontrol", "update", f"jobid={green}", "StartTime=now+6hours")
        c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen", timeout=120)
        [(reason,)] = store_rows(c, "reserved", f"SELECT reason FROM decisions WHERE job_id = {green}")
        assert "in reservation sg-resv" in reason, reason
        assert seen_job(c, green).eligible_time < time.time() + 60, reason
        state_of(c, green, {"RUNNING", *DONE}, 90)
        assert c.exec("controller", "squeue", "-h", "-t", "all", "-j", str(green), "-o", "%N").stdout.strip() == "node2"
    finally:
        for job in jobs:
            c.exec("controller", "scancel", str(job), check=False)
        c.exec("controller", "scontrol", "delete", "reservation=sg-resv", check=False)


def test_a_job_is_not_deferred_into_a_maintenance_it_could_run_before(controller_site: Cluster) -> None:
    """A maintenance of every node booked from 1 h on, for 2 h, and a cleaner hour inside it:
    the window policy defers a 50-minute job there, where Slurm would start it only after the
    maintenance, 3 h on (before: deferred so). Started now, the job ends before the maintenance,
    so the controller releases it and it runs at once."""
    c = controller_site
    now = time.time()
    config = write_config(write_carbon(now + 2 * 3600, now + 2.5 * 3600), "maint")
    c.exec("controller", "scontrol", "delete", "reservation=sg-maint", check=False)
    job = 0
    try:
        c.exec("controller", "scontrol", "create", "reservation", "reservationname=sg-maint", "starttime=now+1hour",
               "duration=120", "nodes=ALL", "flags=MAINT", "users=root")
        job = c.sbatch("alice", ["--gres=gpu:1", "-t", "50", "--comment", "green:flex=6h"], "sleep 1\n")
        c.exec("controller", "slurm-green", "run", "--once", "--config", config, user="sgreen", timeout=120)
        [(reason,)] = store_rows(c, "maint", f"SELECT reason FROM decisions WHERE job_id = {job}")
        assert "reservation sg-maint holds every node it may run on from 1.0 h on" in reason, reason
        state_of(c, job, {"RUNNING", *DONE}, 60)
    finally:
        if job:
            c.exec("controller", "scancel", str(job), check=False)
        c.exec("controller", "scontrol", "delete", "reservation=sg-maint", check=False)


def test_a_job_is_never_slowed_past_its_own_deadline(controller_site: Cluster) -> None:
    """``--deadline=now+60minutes -t 50``, capped at 50 %: before, its limit was raised to 61
    minutes and Slurm cancelled the job (``DEADLINE``) before it ran. Now the decision is enacted
    as asked (no cap, the limit as submitted) and the job runs."""
    c = controller_site
    job = c.sbatch("alice", ["--gres=gpu:1", "--deadline=now+60minutes", "-t", "50", "--comment", "green:flex=5m"],
                   "sleep 1\n")
    try:
        run_once(c, "deadline", "window", "cap_fraction = 0.5\n")
        [(reason,)] = store_rows(c, "deadline", f"SELECT reason FROM decisions WHERE job_id = {job}")
        assert "outrun its --deadline" in reason, reason
        assert state_of(c, job, {"RUNNING", "COMPLETED", "DEADLINE"}, 60) != "DEADLINE"
    finally:
        c.exec("controller", "scancel", str(job), check=False)


def test_metered_energy_reaches_the_store_and_the_models(controller_site: Cluster) -> None:
    """Emulated GPUs (they draw exactly their limit): the Epilog leaves the job's energy in the
    shared directory, the next tick records it and corrects the models' power."""
    c = controller_site
    spool = "/var/spool/slurm-green/telemetry"
    nodes = ("node1", "node2", "node3", "node4")
    for node in nodes:
        c.sh(node, f"printf 'SLURM_GREEN_GPU_EMULATED_STATE=/var/lib/slurm-green/gpus.json\\n"
                   f"SLURM_GREEN_TELEMETRY_DIR={spool}\\n' > /etc/slurm-green/gpu.conf")
    now = time.time()
    extra = f'[controller]\ntelemetry_dir = "{spool}"\nmodel_corrections = "{STATE}/corrections.json"\n'
    config = write_config(write_carbon(now - 3600, now + 3600), "metered")
    path = HOST_DIR / "metered.toml"  # add the two keys to write_config's [controller] table
    path.write_text(path.read_text().replace("[controller]\n", extra, 1))
    start_controller(c, config)
    try:
        job = c.sbatch("alice", ["--gres=gpu:1", "-t", "3", "-J", "resnet50", "--comment", "green:flex=10m,cap=yes"],
                       "sleep 8\n")
        state_of(c, job, DONE, 90)
        query = f"SELECT metered_energy_kwh FROM jobs WHERE job_id = {job}"
        kwh = c.wait_for(lambda: (rows := store_rows(c, "metered", query)) and rows[0][0], 30,
                         message="metered energy recorded by a tick")
        times = slurm_times(c, job)
        watts = kwh * 3.6e6 / (times["end"] - times["start"])
        assert 0.7 * 280 <= watts <= 1.3 * 280, watts  # one A100-like GPU capped at 0.7 x 400 W
        corrections = json.loads(c.exec("controller", "cat", f"{STATE}/corrections.json").stdout)
        assert any(key.endswith("|1|1|0.7") for key in corrections["power_w"]), corrections
        # consumed: no record left (the jobs' progress reports have their own directory there)
        assert c.exec("controller", "find", spool, "-maxdepth", "1", "-type", "f").stdout.strip() == ""
    finally:
        stop_controller(c)
        for node in nodes:
            c.sh(node, "rm -f /etc/slurm-green/gpu.conf /var/lib/slurm-green/gpus.json", check=False)


def test_a_decision_names_the_gpu_type_of_the_nodes_the_job_asked_for(controller_site: Cluster) -> None:
    """node1-2 carry h100, node3-4 a40 (docker/config/gres.conf): the controller reads the
    types from Slurm and plans each job with its type's models; the store names the type."""
    c = controller_site
    script = "sleep 5\n"
    h100 = c.sbatch("alice", ["--gres=gpu:h100:1", "-t", "3", "-J", "resnet50", "--comment", "green:flex=10m"], script)
    a40 = c.sbatch("alice", ["--gres=gpu:a40:1", "-t", "3", "-J", "resnet50", "--comment", "green:flex=10m"], script)
    run_once(c, "typed", "window")
    rows = store_rows(c, "typed", f"SELECT job_id, gpu_type, cap_fraction, expected_energy_kwh FROM decisions"
                                  f" WHERE job_id IN ({h100}, {a40}) ORDER BY job_id")
    assert [(job, gpu, cap) for job, gpu, cap, _ in rows] == [(h100, "h100", 0.7), (a40, "a40", 0.7)], rows
    assert rows[0][3] != rows[1][3]  # each type's models: the same job, another energy
    for job, nodes in ((h100, ("node1", "node2")), (a40, ("node3", "node4"))):
        state_of(c, job, {"RUNNING", *DONE}, 60)
        ran_on = c.exec("controller", "sacct", "-n", "-X", "-P", "-j", str(job), "-o", "NodeList").stdout.strip()
        assert ran_on in nodes, (job, ran_on)
