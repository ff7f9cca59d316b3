"""The controller as a site runs it on the Docker cluster, for the integration tests and campaigns.

`slurm-green run` as the operator user sgreen in the controller container, with a config
and a minute-resolution carbon series written where the container sees them
(docker/.build is the repository's, mounted at /opt/slurm-green), and its state store
read back as its owner.
"""

from __future__ import annotations

import datetime as dt
import json
import time

from cluster import CLUSTER_SCRIPT, NODES, Cluster

# One folder per Slurm version: run_all_versions.sh runs two versions' suites at once, and each
# writes its configs and carbon series under the same names.
_FOLDER = "itest-controller-" + Cluster().version
HOST_DIR = CLUSTER_SCRIPT.parent / ".build" / _FOLDER
IN_CONTAINER = f"/opt/slurm-green/docker/.build/{_FOLDER}"
STATE = "/var/lib/slurm-green/itest"
HIGH, LOW = 450.0, 60.0
INTERVAL_S = 3
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}


def write_carbon(window_start: float, window_end: float, name: str = "carbon-synthetic") -> str:
    """A SYNTHETIC minute-resolution series: high, except LOW in [window_start, window_end)."""
    HOST_DIR.mkdir(parents=True, exist_ok=True)
    first = int(time.time() // 60 * 60) - 3600
    lines = ["timestamp,value"]
    for minute in range(12 * 60):
        t = first + minute * 60
        stamp = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00")
        lines.append(f"{stamp},{LOW if window_start <= t < window_end else HIGH}")
    (HOST_DIR / f"{name}.csv").write_text("\n".join(lines) + "\n")
    return f"csv:{IN_CONTAINER}/{name}.csv"


WINDOW_POLICY = 'name = "window"\ncap_fraction = 0.7\n'


def write_config(source: str, name: str, extra: str = "", policy: str = WINDOW_POLICY) -> str:
    """A controller config named ``name`` (its own state store; ``policy``: the lines of its
    ``[policy]`` table); returns its path in the container."""
    (HOST_DIR / f"{name}.toml").write_text(
        extra + f'[controller]\ninterval_s = {INTERVAL_S}\nstate_db = "{STATE}/{name}.db"\n'
        'decision_key_file = "/etc/slurm-green/decision.key"\n'
        f'[carbon]\nsources = [{json.dumps(source)}]\ncache_dir = "{STATE}/cache-{name}"\n'
        f'[policy]\n{policy}'
    )
    return f"{IN_CONTAINER}/{name}.toml"


def prepare(c: Cluster) -> None:
    """An empty state directory owned by sgreen; fails if the plugin is not installed."""
    hooks = (CLUSTER_SCRIPT.parent / ".build" / c.compose_project / "hooks").read_text().split()
    if "job_submit.lua" not in hooks:
        raise RuntimeError("cluster was brought up without job_submit.lua: run docker/cluster down && up")
    c.sh("controller", f"install -d -o sgreen -g sgreen {STATE} && rm -rf {STATE}/*")


def start_controller(c: Cluster, config: str) -> None:
    """`slurm-green run` in the background, as sgreen (Slurm operator, not root)."""
    c.sh("controller", f"nohup slurm-green run --config {config} >> {STATE}/controller.log 2>&1 &", user="sgreen")


def stop_controller(c: Cluster, signal: str = "TERM") -> None:
    c.exec("controller", "pkill", f"-{signal}", "-f", "slurm-green run", check=False)
    c.wait_for(lambda: c.exec("controller", "pgrep", "-f", "slurm-green run", check=False).returncode != 0, 30,
               message="controller stopped")


def json_number(value: object) -> float | None:
    """A number of ``squeue --json`` (24.11: ``{"set", "number"}``; 22.05: a scalar); None if unset or 0."""
    if isinstance(value, dict):
        return float(value["number"]) if value.get("set") and value.get("number") else None
    return float(value) if value else None


def slurm_times(c: Cluster, job: int) -> dict[str, float | None]:
    """Submit, eligible, start and end time of a job (epoch seconds; None if unset)."""
    [raw] = [j for j in c.squeue("-j", str(job), "-t", "all") if j["job_id"] == job]
    return {k: json_number(raw.get(f"{k}_time")) for k in ("submit", "eligible", "start", "end")}


def state_of(c: Cluster, job: int, states: set[str], timeout: float) -> str:
    return c.wait_for(lambda: (s := c.job_state(job)) in states and s, timeout, message=f"job {job} in {states}")


def store_rows(c: Cluster, name: str, query: str) -> list[list]:
    """Rows of the controller's state store, read where it lives (as its owner)."""
    script = "import json, sqlite3, sys; print(json.dumps(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchall()))"
    out = c.exec("controller", "python3", "-c", script, f"{STATE}/{name}.db", query, user="sgreen").stdout
    return json.loads(out)


def run_once(c: Cluster, name: str, policy: str, settings: str = "") -> None:
    """One tick of the controller as a site runs it (`run --once` as sgreen) with ``[policy] name
    = policy`` (and ``settings``, more TOML lines of ``[policy]``), over a flat (high) carbon
    series: no cleaner hour to wait for."""
    carbon = write_carbon(0.0, 0.0, name=f"carbon-{name}")
    (HOST_DIR / f"{name}.toml").write_text(
        f'[controller]\nstate_db = "{STATE}/{name}.db"\ndecision_key_file = "/etc/slurm-green/decision.key"\n'
        f'[carbon]\nsources = ["{carbon}"]\ncache_dir = "{STATE}/cache-{name}"\n'
        f'[policy]\nname = "{policy}"\n{settings}')
    c.exec("controller", "slurm-green", "run", "--once", "--config", f"{IN_CONTAINER}/{name}.toml", user="sgreen",
           timeout=180)


def job_report(c: Cluster, path: str, job: int, timeout: float = 60) -> dict[str, str]:
    """The ``key=value`` words a job script wrote to ``path`` (``$SLURM_JOB_ID`` in it) on its batch node."""
    def read() -> str | None:
        for node in NODES:
            text = c.sh(node, f"cat {path.replace('$SLURM_JOB_ID', str(job))}", check=False).stdout.strip()
            if text:
                return text
        return None

    text = c.wait_for(read, timeout, message=f"job {job} wrote what it got")
    return dict(item.split("=", 1) for item in text.split())
