"""What job_submit.lua costs slurmctld per submission: none, an empty plugin, ours.

    .venv/bin/python benchmarks/submit_overhead.py [--jobs 1000] [--rounds 10] [--slurm 24.11]

On the running Docker cluster (``docker/cluster up``; it does not start one), submits
JOBS held GPU jobs in each of three setups of slurmctld: no ``JobSubmitPlugins``, Slurm's
Lua plugin with an empty script (what *any* job_submit.lua costs: Slurm builds the job
and partition tables for every call), and slurm-green's script. The setups alternate in
ROUNDS so that drift of this shared machine falls on all of them. The figure is
slurmctld's own time serving ``REQUEST_SUBMIT_BATCH_JOB`` (``sdiag``'s total_time over
its count), which contains the plugin's run and none of sbatch's or Docker's overhead.
Jobs carry ``--comment green:flex=6h,gpus=1-2``, the script's full path (parse, marker,
fallback start). slurm.conf and the script are restored and every submitted job
cancelled at the end, also on failure.
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
INSTALLED = "/etc/slurm/job_submit.lua"
OURS = "/opt/slurm-green/slurm_green/job_submit/job_submit.lua"
#: Slurm's Lua plugin with a script that does nothing: what any job_submit.lua costs.
EMPTY_PLUGIN = """function slurm_job_submit(job_desc, part_list, submit_uid) return slurm.SUCCESS end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid) return slurm.SUCCESS end
return slurm.SUCCESS
"""
SETUPS = {"none": "no job_submit plugin", "empty": "empty job_submit.lua", "ours": "slurm-green job_submit.lua"}


def check(runner: DockerExecRunner, *argv: str, user: str | None = None) -> str:
    """Run ARGV in the runner's container; stdout, or RuntimeError with stderr."""
    runner = replace(runner, user=user) if user else runner
    result = runner.run(argv, timeout=600)
    if not result.ok:
        raise RuntimeError(f"{runner.container}: {' '.join(argv)} failed: {result.stderr.strip()}")
    return result.stdout


def use(ctld: DockerExecRunner, client: DockerExecRunner, setup: str) -> None:
    """Put slurmctld in SETUP ("none", "empty" or "ours") and reconfigure."""
    plugin = "#sg-bench " if setup == "none" else ""
    script = EMPTY_PLUGIN if setup == "empty" else None
    check(ctld, "sh", "-c", f"sed -i -E 's/^(#sg-bench )?JobSubmitPlugins=lua/{plugin}JobSubmitPlugins=lua/' {CONF}")
    if script is None:
        check(ctld, "cp", OURS, INSTALLED)
    else:
        check(ctld, "sh", "-c", f"cat > {INSTALLED} <<'EOF'\n{script}EOF")
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
    parser.add_argument("--jobs", type=int, default=1000, help="submissions per setup (default 1000)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds (default 10)")
    parser.add_argument("--slurm", default="24.11", help="cluster version: 22.05, 24.11 or 26.05")
    args = parser.parse_args()

    project = f"slurmgreen-{args.slurm.replace('.', '')}"
    ctld, client = DockerExecRunner(f"{project}-slurmctld"), DockerExecRunner(f"{project}-controller")
    if "JobSubmitPlugins=lua" not in check(ctld, "cat", CONF):
        print("the cluster runs without job_submit.lua: bring it up from this repository", file=sys.stderr)
        return 2
    totals = {setup: [0, 0] for setup in SETUPS}
    per_round = args.jobs // args.rounds
    name = f"bench-submit-{int(time.time())}"
    try:
        with Progress() as progress:
            for r in range(args.rounds):
                order = list(SETUPS) if r % 2 == 0 else list(reversed(SETUPS))  # drift falls on every setup
                for setup in order:
                    use(ctld, client, setup)
                    n, us = submit_round(client, per_round, name, progress, f"round {r + 1}: {SETUPS[setup]}")
                    totals[setup][0] += n
                    totals[setup][1] += us
    finally:
        use(ctld, client, "ours")
        check(client, "scancel", "--name", name, "-u", SUBMITTER)
    per_job = {setup: us / max(n, 1) for setup, (n, us) in totals.items()}
    print(f"Slurm {args.slurm}: slurmctld time per {RPC} (sdiag total_time / count)")
    for setup, label in SETUPS.items():
        print(f"  {label:<28} {per_job[setup]:7.0f} us  ratio to none {per_job[setup] / per_job['none']:.3f}"
              f"  ({totals[setup][0]} submissions)")
    print(f"  ours / empty plugin          {per_job['ours'] / per_job['empty']:.3f}  (target for our script <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
