"""The simulator's backfill against the live Slurm: one queue, the same starts (issue 10).

The simulator claims to schedule like Slurm's ``sched/backfill`` (docs/simulator.md, the
"Slurm" row). This runs one small queue on the Docker cluster and through
``sim.engine.Simulator`` (FIFO, no decisions) and compares, job by job, when each
started (relative to the moment the whole queue became eligible) and on which nodes.

The queue (4 nodes x 4 GPUs; jobs ask for untyped GPUs, so the cluster's h100/a40 split
does not matter) is built so that its outcome depends on how backfill reserves:

* A-D fill the nodes, leaving 2, 1, 1, 1 GPUs free, with time limits of 3, 5, 5 and 8 min.
* H1 (3 GPUs) is blocked; by time limits node1 is free for it at 3 min: reserved.
* H2 (2 nodes x 4 GPUs, whole nodes) is blocked; node2 and node3 are free at 5 min. Only a
  scheduler that reserves for *every* blocked job (Slurm's backfill does; EASY reserves
  for the first) protects them.
* M (2 GPUs, 10 min) fits node1's free GPUs now but would delay H1: must not start.
* S (1 GPU, 10 min) fits node1's free GPUs and H1 would leave one GPU of node1 spare: a
  scheduler that reserves GPUs puts S there, Slurm reserves whole nodes and puts S on
  node4, the one node no reservation holds.
* E (2 GPUs, 1 min) ends before H1's reservation: backfilled on node1.
* X (1 GPU, 10 min) fits node2/node3 now but would delay H2: waits until node4 frees.
* Y (1 GPU, 1 min) ends before H2's reservation: backfilled on node2.

Live timing: the main scheduler starts jobs at events (a job's end), the backfill pass
every ``bf_interval`` = 5 s (docker/config/slurm.conf.tmpl), sacct stores whole seconds.
So a live start may lag the simulated one by one backfill interval plus a second or two,
and a job that starts because another ended inherits that one's lag: the longest chain
here is A -> H1 -> M (3 starts), hence ``LAG_S`` = 3 x (5 + 1) + 2 = 20 s. Simulated start
times differ by at least 20 s, so order and timing are both checked; nodes exactly.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from cluster import Cluster

from slurm_green.carbon.signal import CarbonSignal
from slurm_green.models.registry import default_registry
from slurm_green.policy.baselines import FifoPolicy
from slurm_green.sim.cluster import ClusterSpec
from slurm_green.sim.engine import TraceOptions
from slurm_green.sim.runner import simulate
from slurm_green.sim.workload import Workload

pytestmark = [pytest.mark.integration, pytest.mark.contract]

#: How much later than simulated a live start may be (module docstring).
LAG_S = 20.0
#: sacct's whole seconds: a live start may read up to this much earlier than simulated.
EARLY_S = 1.0
NODES = ("node1", "node2", "node3", "node4")


@dataclass(frozen=True)
class QueueJob:
    name: str
    gpus_per_node: int
    nodes: int
    limit_min: int
    sleep_s: int


QUEUE = (
    QueueJob("A", 2, 1, 3, 100),
    QueueJob("B", 3, 1, 5, 130),
    QueueJob("C", 3, 1, 5, 140),
    QueueJob("D", 3, 1, 8, 180),
    QueueJob("H1", 3, 1, 3, 60),
    QueueJob("H2", 4, 2, 3, 40),
    QueueJob("M", 2, 1, 10, 30),
    QueueJob("S", 1, 1, 10, 45),
    QueueJob("E", 2, 1, 1, 45),
    QueueJob("X", 1, 1, 10, 30),
    QueueJob("Y", 1, 1, 1, 20),
)

#: What Slurm's backfill does with QUEUE (module docstring): start (s after the queue became
#: eligible) and nodes. At 100 s A ends and H1 takes node1; at 130 s B ends but H2 still needs
#: node3; at 140 s C ends and H2 starts; at 160 s H1 ends and M takes node1.
EXPECTED = {
    "A": (0, ("node1",)), "B": (0, ("node2",)), "C": (0, ("node3",)), "D": (0, ("node4",)),
    "S": (0, ("node4",)), "E": (0, ("node1",)), "Y": (0, ("node2",)),
    "X": (45, ("node4",)), "H1": (100, ("node1",)), "H2": (140, ("node2", "node3")), "M": (160, ("node1",)),
}

Starts = dict[str, tuple[float, tuple[str, ...]]]


def simulated() -> Starts:
    """QUEUE through the simulator: FIFO, unmanaged jobs, exact time limits and runtimes."""
    t0 = 1_700_000_000.0
    workload = Workload.from_columns(
        "backfill-live", np.full(len(QUEUE), t0), np.array([j.gpus_per_node * j.nodes for j in QUEUE]),
        [""] * len(QUEUE), duration_s=np.array([float(j.sleep_s) for j in QUEUE]),
        time_limit_s=np.array([60.0 * j.limit_min for j in QUEUE]))
    spec = ClusterSpec(nodes=len(NODES), gpus_per_node=4)
    flat = pd.Series([100.0], index=pd.DatetimeIndex([pd.Timestamp(t0, unit="s")], tz="UTC"))
    signal = CarbonSignal.from_series(flat)  # accounting only: the queue's starts do not depend on it
    record = simulate(workload, spec, FifoPolicy(), signal, default_registry(),
                      options=TraceOptions(flex_s=0.0, managed=False)).record
    return {job.name: (float(record.start[k] - t0), tuple(NODES[i] for i in record.placed[k]))
            for k, job in enumerate(QUEUE)}


def _hostnames(node_list: str) -> tuple[str, ...]:
    """``node[2-3]`` / ``node[1,3]`` / ``node4`` -> names (the cluster's names only)."""
    m = re.fullmatch(r"(\w+?)\[([\d,-]+)\]", node_list)
    if not m:
        return (node_list,)
    names = []
    for part in m.group(2).split(","):
        first, _, last = part.partition("-")
        names += [f"{m.group(1)}{i}" for i in range(int(first), int(last or first) + 1)]
    return tuple(names)


def live(cluster: Cluster) -> Starts:
    """QUEUE on the Docker cluster: submitted in order by one user, all eligible at one
    ``--begin`` time (equal priority: job id decides), then read back from sacct."""
    begin = int(time.time()) + 30
    begin_text = cluster.exec("controller", "date", "-d", f"@{begin}", "+%Y-%m-%dT%H:%M:%S").stdout.strip()
    ids = {}
    for job in QUEUE:
        ids[job.name] = cluster.sbatch("alice", [
            "-J", job.name, "-N", str(job.nodes), f"--gres=gpu:{job.gpus_per_node}", "-t", str(job.limit_min),
            f"--begin={begin_text}"], f"sleep {job.sleep_s}\n")
    assert time.time() < begin - 2, "submitting took too long: the queue would not become eligible at once"
    id_list = ",".join(str(i) for i in ids.values())

    def rows() -> dict[str, list[str]] | None:
        out = cluster.exec("controller", "sacct", "-X", "-n", "-P", "-j", id_list, "-o", "JobName,State,Start,NodeList",
                           env={"SLURM_TIME_FORMAT": "%s"}).stdout
        table = {line.split("|")[0]: line.split("|") for line in out.splitlines() if line}
        done = len(table) == len(QUEUE) and all(r[1] == "COMPLETED" for r in table.values())
        return table if done else None

    table = cluster.wait_for(rows, timeout=begin - time.time() + 400, interval=5, message="every queued job completed")
    return {name: (float(int(r[2]) - begin), _hostnames(r[3])) for name, r in table.items()}


def _table(**columns: Starts) -> str:
    """One line per job: each column's start and nodes (in every failure message)."""
    return "\n".join(f"{j.name:>3}: " + "  ".join(f"{col} {starts[j.name][0]:4.0f} s {','.join(starts[j.name][1]):<11}"
                                               for col, starts in columns.items()) for j in QUEUE)


def test_simulated_and_live_slurm_start_the_same_jobs_in_the_same_order_on_the_same_nodes(cluster: Cluster):
    designed = {name: (float(t), nodes) for name, (t, nodes) in EXPECTED.items()}
    sim, real = simulated(), live(cluster)
    report = _table(designed=designed, sim=sim, live=real)
    print(report)  # shown with -rP: the live figures docs/simulator.md quotes
    assert sim == designed, f"the simulator does not play the queue as designed\n{report}"
    assert {n: nodes for n, (_, nodes) in real.items()} == {n: nodes for n, (_, nodes) in sim.items()}, report
    for name, (t_sim, _) in sim.items():
        assert t_sim - EARLY_S <= real[name][0] <= t_sim + LAG_S, f"{name} started off time\n{report}"
    for earlier in sim:
        for later in sim:
            if sim[earlier][0] < sim[later][0]:
                assert real[earlier][0] < real[later][0], f"{earlier} started after {later}\n{report}"
