"""A site without slurmdbd cannot make the controller's user a Slurm operator (issue 11.11):
its updates go through one sudo rule and ``[slurm] write_prefix`` (docs/deploy.md).

The controller image has such a user, ``sgnodb``: no Slurm rights, and the documented rule
``sgnodb ALL=(root) NOPASSWD: /usr/bin/scontrol update JobId=*``.
"""

from __future__ import annotations

import time

import pytest
from cluster import Cluster
from controller_site import HOST_DIR, IN_CONTAINER, slurm_times, write_carbon

pytestmark = [pytest.mark.integration, pytest.mark.contract]

STATE = "/var/lib/slurm-green/nodb"


def config(source: str, name: str, prefix: str) -> str:
    (HOST_DIR / f"{name}.toml").write_text(
        f'[controller]\nstate_db = "{STATE}/{name}.db"\ndecision_key_file = "/etc/slurm-green/decision.key"\n'
        f'[slurm]\nwrite_prefix = {prefix}\n'
        f'[carbon]\nsources = ["{source}"]\ncache_dir = "{STATE}/cache-{name}"\n'
        '[policy]\nname = "window"\ncap_fraction = 0.7\n')
    return f"{IN_CONTAINER}/{name}.toml"


def run_once(c: Cluster, path: str):
    return c.exec("controller", "slurm-green", "run", "--once", "--config", path, user="sgnodb", check=False,
                  timeout=120)


def test_without_operator_rights_updates_fail_and_through_the_sudo_rule_they_succeed(cluster: Cluster) -> None:
    c = cluster
    c.sh("controller", f"install -d -o sgnodb -g sgnodb {STATE} && rm -rf {STATE}/*")
    window = time.time() + 3 * 3600
    source = write_carbon(window, window + 3600, "carbon-nodb")
    job = c.sbatch("alice", ["--gres=gpu:1", "-t", "5", "--comment", "green:flex=6h"], "sleep 1\n")
    deadline = slurm_times(c, job)["submit"] + 6 * 3600

    refused = run_once(c, config(source, "nodb-plain", "[]"))
    assert refused.returncode == 3, refused.stderr  # said, not silently 0
    assert "failed" in refused.stderr and abs(slurm_times(c, job)["eligible"] - deadline) <= 1

    done = run_once(c, config(source, "nodb-sudo", '["sudo", "-n"]'))
    assert done.returncode == 0, done.stderr
    assert abs(slurm_times(c, job)["eligible"] - window) < 61  # the decision is in force
    # the rule allows nothing else: not another command, not scontrol's other verbs
    assert c.exec("controller", "sudo", "-n", "/usr/bin/scontrol", "hold", str(job), user="sgnodb",
                  check=False).returncode != 0
    assert c.exec("controller", "sudo", "-n", "/usr/bin/id", user="sgnodb", check=False).returncode != 0
