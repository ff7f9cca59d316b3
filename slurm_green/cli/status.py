"""``slurm-green status``: the cluster as the adapter sees it, for a person or a program.

It reads one snapshot through the same backend the controller uses, so what it
shows is what policies decide on. ``--via-docker CONTAINER`` reaches a cluster whose
Slurm commands live in a container (the Docker test cluster's ``controller``).
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from slurm_green.cli.timefmt import local_time_option, stamp
from slurm_green.core.cluster import ClusterSnapshot
from slurm_green.core.text import terminal_safe
from slurm_green.slurm import DockerExecRunner, make_backend


def snapshot_to_dict(snapshot: ClusterSnapshot) -> dict[str, Any]:
    """The JSON form: stable keys for scripts (times are POSIX seconds, UTC)."""
    return {
        "slurm_version": snapshot.slurm_version,
        "taken_at": snapshot.taken_at,
        "nodes": [
            {
                "name": node.name,
                "state": node.state.value,
                "flags": sorted(node.flags),
                "available": node.available,
                "reason": node.reason,
                "gpus_total": node.gpus_total,
                "gpus_allocated": node.gpus_allocated,
                "gpu_indices_allocated": list(node.gpu_indices_allocated),
                "gpu_type": node.gpu_type,
                "shards_total": node.shards_total,
                "shards_allocated": node.shards_allocated,
                "partitions": list(node.partitions),
            }
            for node in snapshot.nodes
        ],
        "jobs": [
            {
                "id": job.job_id,
                "name": job.name,
                "user": job.user,
                "partition": job.partition,
                "state": job.state.value,
                "reason": job.state_reason,
                "held": job.held,
                "gpus_per_node": job.gpus_per_node,
                "shards_per_node": job.shards_per_node,
                "nodes": job.num_nodes,
                "node_list": list(job.nodes),
                "submit_time": job.submit_time,
                "start_time": job.start_time,
                "time_limit_s": job.time_limit_s,
            }
            for job in snapshot.jobs
        ],
        "partitions": [
            {"name": p.name, "state": p.state, "default": p.default, "nodes": list(p.nodes), "max_time_s": p.max_time_s}
            for p in snapshot.partitions
        ],
    }


def render(snapshot: ClusterSnapshot, console: Console, local: bool = False) -> None:
    """Rich tables of nodes and jobs (times in UTC, or this machine's zone with ``local``).

    Slurm's text (node names and reasons, users, job reasons: free text admins, health checks and
    users write) goes in as literal ``Text``, made ``terminal_safe``: as rich markup, a reason
    holding ``[/dev/nvidia2]`` would fail the command and one holding ``[jdoe]`` would lose that word.
    """
    nodes = Table(title=Text(terminal_safe(
        f"Nodes (Slurm {snapshot.slurm_version}, {stamp(snapshot.taken_at or None, local)})")))
    for column in ("Node", "State", "GPUs used", "GPU indices", "Shards used", "Reason"):
        nodes.add_column(column)
    for node in snapshot.nodes:
        state = "+".join([node.state.value, *sorted(node.flags)])
        style = None if node.available else "red"
        nodes.add_row(
            Text(terminal_safe(node.name)),
            Text(terminal_safe(state)),
            f"{node.gpus_allocated}/{node.gpus_total}",
            ",".join(map(str, node.gpu_indices_allocated)) or "-",
            f"{node.shards_allocated}/{node.shards_total}",
            Text(terminal_safe(node.reason or "")),
            style=style,
        )
    console.print(nodes)
    jobs = Table(title=f"Jobs ({len(snapshot.pending())} pending, {len(snapshot.running())} running)")
    for column in ("Job", "User", "State", "GPUs/node", "Nodes", "Start", "Where / why"):
        jobs.add_column(column)
    for job in sorted(snapshot.jobs, key=lambda job: job.job_id):  # squeue's own order is by partition priority
        where = ",".join(job.nodes) or job.state_reason
        gpus = (
            str(job.gpus_per_node)
            if job.gpus_per_node
            else f"{job.shards_per_node} shards"
            if job.shards_per_node
            else "-"
        )
        state = f"{job.state.value} (held)" if job.held else job.state.value
        jobs.add_row(
            str(job.job_id),
            Text(terminal_safe(job.user)),
            state,
            gpus,
            str(job.num_nodes),
            stamp(job.start_time or None, local),
            Text(terminal_safe(where)),
        )
    console.print(jobs)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the snapshot as JSON (for programs).")
@click.option(
    "--via-docker",
    "container",
    metavar="CONTAINER",
    help="Run Slurm's commands in this container with docker exec (e.g. slurmgreen-2411-controller).",
)
@click.option("--user", "user", metavar="USER", help="With --via-docker: run them as this user.")
@local_time_option
def status(as_json: bool, container: str | None, user: str | None, local_time: bool) -> None:
    """Show nodes and jobs as slurm-green sees them (one snapshot)."""
    runner = DockerExecRunner(container, user=user) if container else None
    snapshot = make_backend(runner).snapshot()  # a SlurmError becomes one line at the top (cli/errors.py)
    if as_json:
        click.echo(json.dumps(snapshot_to_dict(snapshot), indent=2))
    else:
        render(snapshot, Console(), local_time)
