"""job_submit.lua's guard on the live cluster, as a non-root user would meet it.

For every field the controller decides, alice's `scontrol update` is refused on her
managed job (and the job keeps its value), the same update goes through on her unmanaged
job, and the controller's user (sgreen, Slurm Operator) may make it on the managed one.
What reaches alice differs by version; docs/enactment.md says what, from these tests:
22.05 drops the plugin's message on update, so only the return code's text reaches her.
"""

from __future__ import annotations

import pytest
from cluster import CLUSTER_SCRIPT, Cluster

pytestmark = [pytest.mark.integration, pytest.mark.contract]

DENIED = "Access/permission denied"


def show_job(c: Cluster, job: int) -> dict[str, str]:
    """`scontrol -o show job` as KEY -> value (values without spaces are enough here)."""
    line = c.exec("controller", "scontrol", "-o", "show", "job", str(job)).stdout
    return dict(word.partition("=")[::2] for word in line.split() if "=" in word)


# (scontrol update, how the job asks for GPUs, the field shown by `show job`, its value after)
CHANGES = [
    ("StartTime=now+1hour", ["--gres=gpu:1"], "EligibleTime", None),  # None: any new value
    ("Comment=mine", ["--gres=gpu:1"], "Comment", "mine"),
    ("Gres=gpu:2", ["--gres=gpu:1"], "TresPerNode", "gpu:2"),
    ("TresPerNode=gres/gpu:2", ["--gres=gpu:1"], "TresPerNode", "gpu:2"),
    ("TresPerJob=gres/gpu:2", ["--gpus=1"], "TresPerJob", "gpu:2"),
    ("TresPerTask=gres/gpu:2", ["--gpus-per-task=1", "-n1"], "TresPerTask", "gpu:2"),
    ("TresPerSocket=gres/gpu:2", ["--gpus-per-socket=1", "--sockets-per-node=1"], "TresPerSocket", "gpu:2"),
    ("NumNodes=2", ["--gres=gpu:1"], "NumNodes", "2"),
    ("NumTasks=2", ["--gpus-per-task=1", "-n1"], "NumTasks", "2"),
    ("ReqNodeList=node3", ["--gres=gpu:1"], "ReqNodeList", "node3"),
    ("ExcNodeList=node1", ["--gres=gpu:1"], "ExcNodeList", "node1"),
]


@pytest.fixture(scope="module")
def plugin_site(cluster: Cluster) -> Cluster:
    hooks = (CLUSTER_SCRIPT.parent / ".build" / cluster.compose_project / "hooks").read_text().split()
    if "job_submit.lua" not in hooks:
        pytest.fail("cluster was brought up without job_submit.lua: run docker/cluster down && up")
    return cluster


def submit(c: Cluster, gpus: list[str], comment: str) -> int:
    return c.sbatch("alice", [*gpus, "-t", "5", "--hold", "--comment", comment], "sleep 1\n")


def update(c: Cluster, user: str, job: int, change: str):
    return c.exec("controller", "scontrol", "update", f"jobid={job}", change, user=user, check=False)


def has(fields: dict[str, str], key: str, value: str | None, before: dict[str, str]) -> bool:
    return fields[key] != before[key] if value is None else value in fields[key]


@pytest.mark.parametrize(("change", "gpus", "key", "value"), CHANGES, ids=[c[0].split("=")[0] + "=" for c in CHANGES])
def test_only_the_controller_changes_what_it_decides(
    plugin_site: Cluster, change: str, gpus: list[str], key: str, value: str | None
) -> None:
    c = plugin_site
    managed, unmanaged = submit(c, gpus, "green:flex=2h"), submit(c, gpus, "green:off")
    before = show_job(c, managed)

    refused = update(c, "alice", managed, change)
    assert refused.returncode != 0, change
    assert DENIED in refused.stderr + refused.stdout, refused.stderr
    if c.version_tuple >= (23, 2):  # 22.05 drops log_user text of job_modify
        field = "TresPerNode" if change.startswith("Gres=") else change.split("=")[0]
        assert f"only the slurm-green controller may change its {field}." in refused.stderr, refused.stderr
    assert show_job(c, managed)[key] == before[key]

    allowed = update(c, "alice", unmanaged, change)
    if change.startswith("TresPerSocket") and c.version_tuple < (23, 2):  # 22.05 refuses it to root too
        assert "Invalid generic resource" in allowed.stderr, allowed.stderr
        return
    assert allowed.returncode == 0, allowed.stderr
    assert has(show_job(c, unmanaged), key, value, before)

    assert update(c, "sgreen", managed, change).returncode == 0
    assert has(show_job(c, managed), key, value, before)


def test_other_changes_to_a_managed_job_go_through(plugin_site: Cluster) -> None:
    job = submit(plugin_site, ["--gres=gpu:1"], "green:flex=2h")
    p = update(plugin_site, "alice", job, "TimeLimit=4")
    assert p.returncode == 0, p.stderr
    assert show_job(plugin_site, job)["TimeLimit"] == "00:04:00"
