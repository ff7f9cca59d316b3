"""What job_submit.lua costs slurmctld per submission: with and without the plugin.

    .venv/bin/python benchmarks/submit_overhead.py [--jobs 1000] [--rounds 2] [--slurm 24.11]

On the running Docker cluster (``docker/cluster up``; it does not start one), submits
JOBS held GPU jobs with the plugin active and JOBS with ``JobSubmitPlugins=lua`` taken
out of slurmctld's slurm.conf, in ROUNDS alternating halves so that drift of this shared
machine falls on both sides. The figure is slurmctld's own time serving
``REQUEST_SUBMIT_BATCH_JOB`` (``sdiag``'s total_time over its count), which contains the
plugin's run and none of sbatch's or Docker's overhead. Jobs carry
``--comment green:flex=6h,gpus=1-2``, the plugin's full path (parse, marker, fallback
start). slurm.conf is restored and every submitted job cancelled at the end, also on
failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

from rich.progress import Progress

from slurm_green.slurm import sdiag
from slurm_green.slurm.runner import DockerExecRunner

SUBMITTER = "alice"
RPC = "REQUEST_SUBMIT_BATCH_JOB"
BATCH = 100  # sbatch calls per docker exec
CONF = "/etc/slurm/slurm.conf"


def check(runner: DockerExecRunner, *argv: str, user: str | None = None) -> str:
    """Run ARGV in the runner's container; stdout, or RuntimeError with stderr."""
    runner = replace(runner, user=user) if user else runner
    result = runner.run(argv, timeout=600)
    if not result.ok:
        raise RuntimeError(f"{runner.container}: {' '.join(argv)} failed: {result.stderr.strip()}")
    return result.stdout


def set_plugin(ctld: DockerExecRunner, client: DockerExecRunner, on: bool) -> None:
    """Switch JobSubmitPlugins=lua in slurmctld's slurm.conf and reconfigure."""
    edit = (f"sed -i 's/^#sg-bench JobSubmitPlugins=lua/JobSubmitPlugins=lua/' {CONF}" if on
            else f"sed -i 's/^JobSubmitPlugins=lua/#sg-bench JobSubmitPlugins=lua/' {CONF}")
    check(ctld, "sh", "-c", edit)
    check(ctld, "scontrol", "reconfigure")
    for _ in range(120):
        try:
            check(client, "scontrol", "ping")
            return
        except RuntimeError:
            time.sleep(0.5)
    raise RuntimeError("slurmctld did not answer after reconfigure")


def submit_round(client: DockerExecRunner, count: int, name: str, progress: Progress, label: str) -> tuple[int, int]:
    """Submit COUNT held jobs; returns (RPCs, microseconds) slurmctld spent on them."""
    before = sdiag.rpc_counts(check(client, "sdiag"))
    task = progress.add_task(label, total=count)
    for first in range(0, count, BATCH):
        size = min(BATCH, count - first)
        loop = (f"for i in $(seq {size}); do sbatch --hold --output=/dev/null --chdir=/tmp -t 10 -J {name} "
                "--gres=gpu:1 --comment green:flex=6h,gpus=1-2 --wrap 'sleep 60' >/dev/null || exit 1; done")
        check(client, "bash", "-c", loop, user=SUBMITTER)
        progress.advance(task, size)
    after = sdiag.rpc_counts(check(client, "sdiag"))
    count_rpc = after.by_type.get(RPC, 0) - before.by_type.get(RPC, 0)
    time_us = after.time_us_by_type.get(RPC, 0) - before.time_us_by_type.get(RPC, 0)
    check(client, "scancel", "--name", name, "-u", SUBMITTER)
    return count_rpc, time_us


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="submissions per side (default 1000)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per side (default 2)")
    parser.add_argument("--slurm", default="24.11", help="cluster version: 22.05, 24.11 or 26.05")
    args = parser.parse_args()

    project = f"slurmgreen-{args.slurm.replace('.', '')}"
    ctld, client = DockerExecRunner(f"{project}-slurmctld"), DockerExecRunner(f"{project}-controller")
    if "JobSubmitPlugins=lua" not in check(ctld, "cat", CONF):
        print("the cluster runs without job_submit.lua: bring it up from this repository", file=sys.stderr)
        return 2
    totals = {True: [0, 0], False: [0, 0]}
    per_round = args.jobs // args.rounds
    name = f"bench-submit-{int(time.time())}"
    try:
        with Progress() as progress:
            for r in range(args.rounds):
                for on in ((True, False) if r % 2 == 0 else (False, True)):
                    set_plugin(ctld, client, on)
                    n, us = submit_round(client, per_round, name, progress,
                                         f"round {r + 1}: {'with' if on else 'without'} plugin")
                    totals[on][0] += n
                    totals[on][1] += us
    finally:
        set_plugin(ctld, client, True)
        check(client, "scancel", "--name", name, "-u", SUBMITTER)
    with_us = totals[True][1] / max(totals[True][0], 1)
    without_us = totals[False][1] / max(totals[False][0], 1)
    print(f"Slurm {args.slurm}: slurmctld time per {RPC} (sdiag total_time / count)")
    print(f"  with job_submit.lua     {with_us:8.0f} us  over {totals[True][0]} submissions")
    print(f"  without                 {without_us:8.0f} us  over {totals[False][0]} submissions")
    print(f"  ratio with/without      {with_us / without_us:8.3f}  (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
