"""Handle on the Docker test cluster (docker/cluster) for integration tests.

    c = Cluster("24.11")
    c.exec("controller", "sinfo")                      # -> CompletedProcess (text)
    job = c.sbatch("alice", ["--gres=gpu:2"], "#!/bin/bash\\nsleep 60\\n")
    c.wait_for(lambda: c.job_state(job) == "RUNNING", timeout=30)
    c.stop_node("node3"); c.start_node("node3")

Standard library only. Every command goes through `docker exec` into the
containers of compose project `slurmgreen-<version without dot>`.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence, TypeVar

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = REPO / "docker" / "cluster"
VERSIONS = ("22.05", "24.11", "26.05")
DEFAULT_VERSION = "24.11"
NODES = ("node1", "node2", "node3", "node4")
SERVICES = ("slurmctld", *NODES, "controller")
USERS = ("alice", "bob", "sgreen")

T = TypeVar("T")


class ClusterError(RuntimeError):
    pass


class Cluster:
    """The running test cluster of one Slurm version."""

    def __init__(self, version: str | None = None) -> None:
        version = version or os.environ.get("SLURM_GREEN_SLURM") or DEFAULT_VERSION
        if version not in VERSIONS:
            raise ValueError(f"unknown Slurm version {version!r}; one of {VERSIONS}")
        self.version = version

    # ------------------------------------------------------------------ naming
    @property
    def compose_project(self) -> str:
        return "slurmgreen-" + self.version.replace(".", "")

    @property
    def version_tuple(self) -> tuple[int, int]:
        major, minor = self.version.split(".")
        return int(major), int(minor)

    def container(self, service: str) -> str:
        if service not in SERVICES:
            raise ValueError(f"unknown service {service!r}; one of {SERVICES}")
        return f"{self.compose_project}-{service}"

    # ------------------------------------------------------------------ lifecycle
    def up(self, timeout: float = 1800) -> subprocess.CompletedProcess:
        """`docker/cluster up --slurm VERSION` (builds images on first use)."""
        return _run([str(CLUSTER_SCRIPT), "up", "--slurm", self.version], timeout=timeout)

    def down(self) -> subprocess.CompletedProcess:
        return _run([str(CLUSTER_SCRIPT), "down", "--slurm", self.version], timeout=300)

    def stop_node(self, name: str, timeout: int = 2) -> None:
        """Stop a compute node's container (`docker stop`): Slurm will see it as not responding."""
        if name not in NODES:
            raise ValueError(f"not a compute node: {name!r}")
        _run(["docker", "stop", "-t", str(timeout), self.container(name)], timeout=60)

    def start_node(self, name: str) -> None:
        if name not in NODES:
            raise ValueError(f"not a compute node: {name!r}")
        _run(["docker", "start", self.container(name)], timeout=60)

    def is_running(self, service: str) -> bool:
        p = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", self.container(service)],
                           capture_output=True, text=True)
        return p.returncode == 0 and p.stdout.strip() == "true"

    # ------------------------------------------------------------------ commands
    def exec(self, service: str, *argv: str, user: str | None = None, check: bool = True,
             input: str | None = None, timeout: float = 120,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run ARGV in SERVICE's container (as USER, default root); text output."""
        cmd = ["docker", "exec"]
        if input is not None:
            cmd.append("-i")
        if user:
            cmd += ["-u", user, "-w", "/root" if user == "root" else f"/home/{user}"]
        for k, v in (env or {}).items():
            cmd += ["-e", f"{k}={v}"]
        cmd += [self.container(service), *argv]
        return _run(cmd, check=check, input=input, timeout=timeout)

    def sh(self, service: str, script: str, user: str | None = None, check: bool = True,
           timeout: float = 120) -> subprocess.CompletedProcess:
        """Run a bash snippet in SERVICE's container."""
        return self.exec(service, "bash", "-c", script, user=user, check=check, timeout=timeout)

    def sbatch(self, user: str, args: Sequence[str] = (), script: str | None = None,
               service: str = "controller") -> int:
        """Submit a batch job as USER from the controller; returns the job id.

        SCRIPT is the job script text (default: `sleep 300`); it gets a `#!/bin/bash`
        line if it has none. Output goes to /dev/null unless ARGS set -o/-e."""
        if script is None:
            script = "sleep 300\n"
        if not script.startswith("#!"):
            script = "#!/bin/bash\n" + script
        args = list(args)
        opts = []
        if not any(a.startswith(("-o", "--output")) for a in args):
            opts.append("--output=/dev/null")
        if not any(a.startswith(("-D", "--chdir")) for a in args):
            opts.append("--chdir=/tmp")
        p = self.exec(service, "sbatch", "--parsable", *opts, *args, user=user, input=script)
        out = p.stdout.strip().splitlines()
        if not out:
            raise ClusterError(f"sbatch printed no job id: {p.stderr.strip()}")
        return int(out[-1].split(";")[0])

    def scancel_all(self) -> None:
        """Cancel every job of every user (as root)."""
        for u in USERS:
            self.exec("controller", "scancel", "-u", u, check=False)
        self.exec("controller", "scancel", "-u", "root", check=False)

    # ------------------------------------------------------------------ queries
    def json(self, service: str, *argv: str, user: str | None = None) -> dict:
        return json.loads(self.exec(service, *argv, user=user).stdout)

    def squeue(self, *extra: str) -> list[dict]:
        """Jobs from `squeue --json` (raw dicts, version-specific shapes)."""
        return self.json("controller", "squeue", "--json", *extra)["jobs"]

    def node_states(self) -> dict[str, str]:
        """NodeName -> compact state from sinfo (e.g. idle, mixed, down*, idle*)."""
        p = self.exec("controller", "sinfo", "-h", "-N", "-o", "%N %t", check=False)
        states = {}
        for line in p.stdout.splitlines():
            name, _, state = line.partition(" ")
            states[name] = state.strip()
        return states

    def node_gres(self, name: str) -> str:
        return self.exec("controller", "sinfo", "-h", "-n", name, "-o", "%G").stdout.strip()

    def job_state(self, job_id: int) -> str | None:
        """PENDING, RUNNING, COMPLETED... (from squeue, then sacct); None if unknown."""
        p = self.exec("controller", "squeue", "-h", "-j", str(job_id), "-t", "all", "-o", "%T",
                      check=False)
        state = p.stdout.strip().splitlines()
        if p.returncode == 0 and state:
            return state[0]
        p = self.exec("controller", "sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "State",
                      check=False)
        state = p.stdout.strip().splitlines()
        return state[0].split()[0] if state else None

    def all_nodes_idle(self) -> bool:
        states = self.node_states()
        return all(states.get(n) == "idle" for n in NODES)

    # ------------------------------------------------------------------ waiting
    @staticmethod
    def wait_for(predicate: Callable[[], T], timeout: float = 60, interval: float = 0.5,
                 message: str | None = None) -> T:
        """Call PREDICATE until it returns a truthy value (returned); TimeoutError after TIMEOUT s."""
        deadline = time.monotonic() + timeout
        last_exc: Exception | None = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except (ClusterError, subprocess.SubprocessError, ValueError) as e:
                last_exc = e
            if time.monotonic() >= deadline:
                what = message or getattr(predicate, "__name__", "condition")
                raise TimeoutError(f"{what} not met after {timeout:.0f} s"
                                   + (f" (last error: {last_exc})" if last_exc else ""))
            time.sleep(interval)

    def wait_all_idle(self, timeout: float = 120) -> None:
        self.wait_for(self.all_nodes_idle, timeout, message=f"all nodes idle (now {self.node_states()})")


def _run(argv: Iterable[str], check: bool = True, input: str | None = None,
         timeout: float | None = None) -> subprocess.CompletedProcess:
    argv = list(argv)
    try:
        # surrogateescape: tests submit names and comments that are not UTF-8 (users may)
        p = subprocess.run(argv, capture_output=True, encoding="utf-8", errors="surrogateescape", input=input,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise ClusterError(f"timed out after {timeout} s: {shlex.join(argv)}") from e
    if check and p.returncode != 0:
        raise ClusterError(f"exit {p.returncode}: {shlex.join(argv)}\n"
                           f"stdout: {p.stdout.strip()}\nstderr: {p.stderr.strip()}")
    return p
