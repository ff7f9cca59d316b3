"""Integration tests against the Docker Slurm cluster (docker/cluster).

* Every test under tests/integration is marked `integration` automatically.
* `contract` marks tests that must pass on every supported Slurm version;
  run_all_versions.sh runs only those on the non-default versions.
* The session fixture `cluster` runs `docker/cluster up --slurm $SLURM_GREEN_SLURM`
  (default 24.11) once, waits until every node is idle and yields a `Cluster`.
  It takes the cluster down at the end unless SLURM_GREEN_KEEP_CLUSTER=1.
* Between tests, every job is cancelled and stopped node containers are started again.

Integration tests are skipped unless selected on purpose: `-m integration`
(or any -m expression naming `integration`/`contract`) or SLURM_GREEN_INTEGRATION=1.
A plain `pytest` therefore never builds images behind your back.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster import CLUSTER_SCRIPT, NODES, Cluster  # noqa: E402

HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: needs the live Slurm cluster in Docker (docker/cluster up)")
    config.addinivalue_line(
        "markers", "contract: integration test that must pass on every supported Slurm version "
                   "(22.05, 24.11, 26.05); run_all_versions.sh runs only these on non-default versions")


def _selected_on_purpose(config: pytest.Config) -> bool:
    if os.environ.get("SLURM_GREEN_INTEGRATION") == "1":
        return True
    expr = config.getoption("markexpr", "") or ""
    return "integration" in expr or "contract" in expr


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = None if _selected_on_purpose(config) else pytest.mark.skip(
        reason="integration test: run with `pytest -m integration` (starts the Docker cluster)")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.integration)
            if skip is not None:
                item.add_marker(skip)


def _version() -> str:
    return os.environ.get("SLURM_GREEN_SLURM", "24.11")


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    """The running cluster of $SLURM_GREEN_SLURM, brought up once per session."""
    if shutil.which("docker") is None:
        pytest.fail("docker is not installed: integration tests need the Docker cluster")
    c = Cluster(_version())
    t0 = time.monotonic()
    p = subprocess.run([str(CLUSTER_SCRIPT), "up", "--slurm", c.version],
                       capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        pytest.fail(f"`docker/cluster up --slurm {c.version}` failed (exit {p.returncode}):\n"
                    f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}", pytrace=False)
    sys.stderr.write(f"\n[cluster] Slurm {c.version} up in {time.monotonic() - t0:.1f} s\n")
    _restore(c, timeout=120)
    try:
        yield c
    finally:
        if os.environ.get("SLURM_GREEN_KEEP_CLUSTER") == "1":
            sys.stderr.write(f"\n[cluster] keeping {c.compose_project} (SLURM_GREEN_KEEP_CLUSTER=1)\n")
        else:
            subprocess.run([str(CLUSTER_SCRIPT), "down", "--slurm", c.version],
                           capture_output=True, text=True, timeout=300)


def _restore(c: Cluster, timeout: float = 90) -> None:
    """Empty queue, every node container running and every node idle."""
    c.scancel_all()
    for node in NODES:
        if not c.is_running(node):
            c.start_node(node)
    c.wait_for(lambda: not c.exec("controller", "squeue", "-h", "-o", "%i", "-t",
                                  "PD,R,CG,S,CF", check=False).stdout.strip(),
               timeout=60, message="empty queue")
    deadline = time.monotonic() + timeout
    resumed = False
    while not c.all_nodes_idle():
        states = c.node_states()
        if not resumed and time.monotonic() > deadline - timeout / 2:
            # Drained/down nodes whose slurmd is running: give them back.
            bad = [n for n, s in states.items() if s.rstrip("*~#!%$@^-") in ("drain", "drng", "down", "fail")]
            for n in bad:
                c.exec("controller", "scontrol", "update", f"nodename={n}", "state=resume", check=False)
            resumed = True
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes not idle after {timeout:.0f} s: {states}")
        time.sleep(0.5)


@pytest.fixture(autouse=True)
def _clean_cluster(request: pytest.FixtureRequest):
    """Cancel all jobs and restart stopped nodes around every integration test."""
    if "cluster" not in request.fixturenames:
        yield
        return
    c: Cluster = request.getfixturevalue("cluster")
    _restore(c)
    yield
    c.scancel_all()
