"""What a snapshot costs on the running Docker cluster: wall time and slurmctld RPCs.

    .venv/bin/python benchmarks/snapshot_cost.py [--jobs 1000] [--repeat 7] [--slurm 24.11]

Submits N held GPU jobs as alice (separate jobs, not an array: a pending array is a
single squeue record), takes snapshots as the controller's account (sgreen) through
``docker exec``, reading jobs as squeue text (the default) and as JSON (the fallback),
and prints the median wall time of each and the RPCs per snapshot from
``sdiag``'s per-user counters (sdiag itself and Docker's health-check pings run as root
and are not counted). Cancels the jobs it submitted at the end, even on failure.
Needs the cluster from ``docker/cluster up``; it does not start one.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from rich.progress import Progress

from slurm_green.slurm import sdiag
from slurm_green.slurm.cli_backend import CliBackend
from slurm_green.slurm.runner import DockerExecRunner

SUBMITTER = "alice"
CONTROLLER_USER = "sgreen"
BATCH = 100  # jobs per docker exec: one shell loop per batch keeps the progress bar moving


def docker_exec(container: str, *argv: str, user: str | None = None, timeout: float = 600) -> str:
    command = ["docker", "exec", *(["--user", user] if user else []), container, *argv]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()}")
    return done.stdout


def submit(container: str, count: int, name: str) -> float:
    """Submit COUNT held jobs named NAME; returns the seconds it took."""
    started = time.monotonic()
    with Progress() as progress:
        task = progress.add_task(f"sbatch x{count}", total=count)
        for first in range(0, count, BATCH):
            size = min(BATCH, count - first)
            loop = (
                f"for i in $(seq {size}); do sbatch --hold --output=/dev/null --chdir=/tmp -t 10 -J {name} "
                "--gres=gpu:1 --wrap 'sleep 60' >/dev/null || exit 1; done"
            )
            docker_exec(container, "bash", "-c", loop, user=SUBMITTER)
            progress.advance(task, size)
    return time.monotonic() - started


def measure(backend: CliBackend, container: str, repeat: int) -> tuple[list[float], list[int], list[dict[str, int]]]:
    backend.snapshot()  # fills the partition cache, as a running controller would have
    times, costs, kinds = [], [], []
    for _ in range(repeat):
        before = sdiag.rpc_counts(docker_exec(container, "sdiag"))
        started = time.perf_counter()
        snapshot = backend.snapshot()
        times.append(time.perf_counter() - started)
        after = sdiag.rpc_counts(docker_exec(container, "sdiag"))
        costs.append(sdiag.difference(before.by_user, after.by_user).get(CONTROLLER_USER, 0))
        kinds.append(sdiag.difference(before.by_type, after.by_type))
    print(f"snapshot: {len(snapshot.jobs)} jobs ({len(snapshot.pending())} pending), {len(snapshot.nodes)} nodes")
    return times, costs, kinds


#: Runs in the controller container, where a site's controller runs: no docker exec per command.
IN_CONTAINER = """
import statistics, sys, time
from slurm_green.slurm.cli_backend import CliBackend
backend = CliBackend(timeout_s=120, text_jobs=sys.argv[2] == "text")
backend.snapshot()
times = []
for _ in range(int(sys.argv[1])):
    started = time.perf_counter()
    backend.snapshot()
    times.append(time.perf_counter() - started)
print(f"{statistics.median(times) * 1000:.0f} {min(times) * 1000:.0f} {max(times) * 1000:.0f}")
"""


def measure_in_container(container: str, repeat: int, read: str) -> list[str]:
    """Median, min and max ms of a snapshot taken inside the container by the controller's user."""
    return docker_exec(
        container, "/opt/venv/bin/python", "-c", IN_CONTAINER, str(repeat), read, user=CONTROLLER_USER
    ).split()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="pending jobs to submit (default 1000)")
    parser.add_argument("--repeat", type=int, default=7, help="snapshots to time (default 7)")
    parser.add_argument("--slurm", default="24.11", help="cluster version: 22.05, 24.11 or 26.05")
    args = parser.parse_args()

    container = f"slurmgreen-{args.slurm.replace('.', '')}-controller"
    name = f"bench-{int(time.time())}"
    rows = []
    try:
        submit_s = submit(container, args.jobs, name)
        print(f"submitted {args.jobs} held jobs in {submit_s:.1f} s ({args.jobs / submit_s:.0f} jobs/s)")
        for read in ("text", "json"):  # squeue -O text (the default) and squeue --json (the fallback)
            backend = CliBackend(DockerExecRunner(container, user=CONTROLLER_USER), timeout_s=120,
                                 text_jobs=read == "text")
            times, costs, kinds = measure(backend, container, args.repeat)
            rows.append((read, times, costs, kinds[-1], measure_in_container(container, args.repeat, read)))
    finally:
        docker_exec(container, "scancel", "--name", name, "-u", SUBMITTER, user="root")
    print(f"Slurm {args.slurm}, {args.repeat} snapshots each; from the host (two docker exec per snapshot) "
          "and in the controller container, as a site runs it:")
    for read, times, costs, kinds, inside in rows:
        print(f"  jobs as {read:4s}: host median {statistics.median(times) * 1000:5.0f} ms "
              f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}); in the container median {inside[0]} ms "
              f"(min {inside[1]}, max {inside[2]}); RPCs (user {CONTROLLER_USER}) {costs}; by type, last run: {kinds}")
    ratio = statistics.median(rows[1][1]) / statistics.median(rows[0][1])
    print(f"  json / text wall time from the host: {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
