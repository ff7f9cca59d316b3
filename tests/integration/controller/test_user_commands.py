"""The users' and admins' commands against the live cluster (issue 15): `why`, `when` and
`report --user` run as alice, the metrics endpoint of a running controller, `pause`/`resume`
as the service user, and `run` refused as root.

The controller runs as sgreen in the controller container (controller_site), with a carbon
series whose low window opens 20 minutes ahead, so a green job stays deferred while the
commands look at it.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from cluster import Cluster
from controller_site import (DONE, HIGH, HOST_DIR, IN_CONTAINER, INTERVAL_S, LOW, STATE, prepare, slurm_times,
                             start_controller, state_of, stop_controller, store_rows, write_carbon)

pytestmark = [pytest.mark.integration]

NAME = "users"
METRICS_PORT = 9471


def write_users_config(source: str) -> str:
    """The controller's config with the metrics endpoint on (controller_site's has none)."""
    HOST_DIR.mkdir(parents=True, exist_ok=True)
    (HOST_DIR / f"{NAME}.toml").write_text(
        f'[controller]\ninterval_s = {INTERVAL_S}\nstate_db = "{STATE}/{NAME}.db"\n'
        f'decision_key_file = "/etc/slurm-green/decision.key"\nmetrics_port = {METRICS_PORT}\n'
        f'[carbon]\nsources = [{json.dumps(source)}]\ncache_dir = "{STATE}/cache-{NAME}"\n'
        '[policy]\nname = "window"\ncap_fraction = 0.7\n')
    return f"{IN_CONTAINER}/{NAME}.toml"


def metrics(c: Cluster) -> dict[str, float]:
    """The endpoint's samples, ``name{labels}`` -> value, read from inside the container."""
    script = f"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{METRICS_PORT}/metrics').read().decode())"
    text = c.exec("controller", "python3", "-c", script).stdout
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def green(c: Cluster, *args: str) -> tuple[int, str]:
    """`slurm-green ARGS` in the controller container; the user is the first argument."""
    user, *argv = args
    done = c.exec("controller", "slurm-green", *argv, user=user, check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def site(cluster: Cluster):
    """The controller, running for the whole module (the jobs are cancelled around each test)."""
    prepare(cluster)
    window_start = time.time() + 20 * 60
    config = write_users_config(write_carbon(window_start, window_start + 30 * 60, name="carbon-users"))
    start_controller(cluster, config)
    yield cluster, config, (window_start // 60 + 1) * 60  # the series' first low minute
    stop_controller(cluster)


def deferred_job(c: Cluster, boundary: float) -> int:
    """A green job of alice, deferred by the controller to the low window."""
    job = c.sbatch("alice", ["--gres=gpu:1", "-t", "5", "--comment", "green:flex=1h"], "sleep 20\n")
    c.wait_for(lambda: slurm_times(c, job)["eligible"] == boundary, 60, message="green job deferred to the window")
    return job


def test_why_as_the_jobs_owner(site) -> None:
    c, config, boundary = site
    job = deferred_job(c, boundary)
    query = f"SELECT ok FROM actions WHERE job_id = {job} AND kind = 'SetDecision'"
    c.wait_for(lambda: [1] in store_rows(c, NAME, query), 30, message="the cap decision accepted")
    code, out = green(c, "alice", "why", str(job), "--config", config)
    assert code == 0, out
    assert f"job {job} (alice" in out and "PENDING, managed by slurm-green, may wait 1.0 h" in out
    assert "power cap:      70% enacted (decided: 70%)" in out
    assert f"{LOW:.0f} gCO2eq/kWh at the decided start vs {HIGH:.0f} now" in out
    assert "reason:         deferred" in out
    code, out = green(c, "alice", "why", str(job), "--config", config, "--json")
    assert code == 0, out
    payload = json.loads(out)
    assert payload["decided_start"] == time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(boundary))
    assert payload["gpus_per_node"] == 1 and payload["cap_enacted"] == 0.7 and payload["notes"] == []


def test_when_from_the_controllers_forecast(site) -> None:
    c, config, boundary = site
    code, out = green(c, "alice", "when", "--duration", "10m", "--deadline", "2h", "--config", config, "--json")
    assert code == 0, out
    payload = json.loads(out)
    assert payload["start_epoch"] == boundary and payload["then_g_per_kwh"] == LOW and payload["now_g_per_kwh"] == HIGH
    assert "controller's cache" in payload["source"]
    code, out = green(c, "alice", "when", "--duration", "10m", "--deadline", "2h", "--config", config)
    assert code == 0 and re.search(r"sbatch --begin=\d{4}-\d\d-\d\dT\d\d:\d\d:00 \.\.\.", out), out


def test_report_for_a_user_with_slurms_account(site) -> None:
    c, config, boundary = site
    job = deferred_job(c, boundary)
    code, out = green(c, "alice", "report", "--user", "alice", "--since", "1h", "--config", config, "--json")
    assert code == 0, out
    payload = json.loads(out)
    [row] = [r for r in payload["jobs"] if r["job_id"] == job]
    assert row["user"] == "alice" and row["account"] == "research" and row["cap_fraction"] == 0.7
    assert [g["account"] for g in payload["by_account"]] == ["research"]
    code, out = green(c, "alice", "report", "--user", "bob", "--config", config, "--json")
    assert code == 0 and json.loads(out)["jobs"] == []


def test_metrics_endpoint(site) -> None:
    c, _, boundary = site
    deferred_job(c, boundary)
    m = c.wait_for(lambda: (s := metrics(c)).get('slurm_green_deferred_jobs{account="research",partition="gpu"}') == 1
                   and s, 30, message="the deferred job exported")
    assert m["slurm_green_carbon_intensity_g_per_kwh"] == HIGH
    assert m["slurm_green_paused"] == 0 and m["slurm_green_tick_duration_seconds_count"] >= 2
    [source] = [k for k in m if k.startswith("slurm_green_carbon_source_info")]
    assert 'synthetic="false"' in source and "carbon-users.csv" in source
    assert m['slurm_green_actions_total{kind="SetDecision",outcome="ok"}'] >= 1


def test_pause_releases_the_job_and_resume_ends_it(site) -> None:
    c, config, boundary = site
    job = deferred_job(c, boundary)
    code, out = green(c, "sgreen", "pause", "--reason", "drill", "--config", config)
    assert code == 0 and "managed pending job(s) released now" in out, out
    state_of(c, job, {"RUNNING", *DONE}, 30)
    m = c.wait_for(lambda: (s := metrics(c)).get("slurm_green_paused") == 1 and s, 30, message="paused exported")
    assert not [k for k in m if k.startswith("slurm_green_deferred_jobs{")]
    code, out = green(c, "sgreen", "resume", "--config", config)
    assert code == 0 and "resumed (paused by sgreen: drill)" in out, out


def test_run_as_root_is_refused(site) -> None:
    c, config, _ = site
    code, out = green(c, "root", "run", "--once", "--config", config)
    assert code == 1, out
    assert f"running as root would leave {STATE}/{NAME}.db owned by root" in out and "sudo -u sgreen" in out
