"""A new admin's path (issue 15): the built wheel, installed as README step 1 says, not editable.

The wheel is built from this checkout and installed into a fresh venv in the controller
container, away from the repository copy the cluster's own /opt/venv puts on sys.path.
The container has no network: the venv sees /opt/venv's packages (the image installs
[project].dependencies only) through a .pth line, and pip installs with --no-index, so
pip's own check that the wheel's dependencies are met is part of the test. From that
install: `install --print` and the plugin line it prints, `sbatch` rendering a template,
and `run --once` as the operator user sgreen releasing a green job in a low-carbon window.
"""

from __future__ import annotations

import fcntl
import hashlib
import shlex
import subprocess
import sys
import time

import pytest
from cluster import CLUSTER_SCRIPT, Cluster
from controller_site import HOST_DIR, IN_CONTAINER, prepare, state_of, store_rows, write_carbon, write_config

from slurm_green.job_submit import plugin_path

pytestmark = [pytest.mark.integration, pytest.mark.contract]

REPO = CLUSTER_SCRIPT.parent.parent
VENV = "/opt/new-admin-venv"
# Run from / without PYTHONPATH: nothing but the installed wheel may provide slurm_green.
CLEAN = f"cd / && env -u PYTHONPATH {VENV}/bin"


@pytest.fixture(scope="module")
def installed(cluster: Cluster) -> Cluster:
    """The wheel built on the host and installed into a fresh venv in the controller container."""
    wheels = HOST_DIR / "wheel"
    subprocess.run(["rm", "-rf", str(wheels)], check=True)
    # One build at a time: setuptools builds in the checkout's build/, and run_all_versions.sh
    # runs two versions' suites at once.
    with open(CLUSTER_SCRIPT.parent / ".build" / "wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
                       check=True, capture_output=True, timeout=300)
    [wheel] = wheels.glob("slurm_green-*.whl")
    cluster.sh("controller", f"""set -e
        rm -rf {VENV}; python3 -m venv {VENV}
        site=$({VENV}/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        /opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/image-deps.pth"
        {CLEAN}/pip install -q --no-index --disable-pip-version-check {IN_CONTAINER}/wheel/{wheel.name}""")
    prepare(cluster)
    return cluster


def test_the_wheel_is_what_runs(installed: Cluster) -> None:
    where = installed.sh("controller", f"{CLEAN}/python -c 'import slurm_green; print(slurm_green.__file__)'").stdout
    assert where.strip().startswith(f"{VENV}/lib/"), where


def test_install_print_and_the_plugin_line_it_prints(installed: Cluster) -> None:
    config = write_config(write_carbon(0, 0), "new-admin-print")
    out = installed.sh("controller", f"{CLEAN}/slurm-green install --print --config {config} "
                                     f"--python {VENV}/bin/python --gpu-type a100").stdout
    assert "PrologFlags" in out and "ExecStart" in out and "[Service]" in out
    [line] = [x for x in out.splitlines() if x.startswith("install -m 0644 ") and "job_submit.lua" in x]
    target = "/tmp/new-admin-job_submit.lua"
    installed.sh("controller", f"cd / && {line.replace('/etc/slurm/job_submit.lua', target)}")
    copied = installed.sh("controller", f"sha256sum {target}").stdout.split()[0]
    assert copied == hashlib.sha256(plugin_path().read_bytes()).hexdigest()


def test_the_printed_steps_create_the_service_account_only_where_it_is_missing(installed: Cluster) -> None:
    """``sacctmgr add user ... account=X`` fails where account X does not exist: the printed
    steps create it first, and leave an existing one (the cluster's ``ops``) alone."""
    c = installed
    account = "sg-new-admin"
    for name, existed in ((account, False), ("ops", True)):
        out = c.sh("controller", f"{CLEAN}/slurm-green install --print --account {name}").stdout
        [line] = [x for x in out.splitlines() if x.startswith("sacctmgr -n -P show account ")]
        for again in (False, True):  # the step may be run again: the second run changes nothing
            ran = c.sh("controller", f"cd / && {line}", check=False)
            assert ran.returncode == 0, ran.stdout + ran.stderr
            assert ("Adding Account" in ran.stdout) == (not existed and not again), ran.stdout
        shown = c.sh("controller", f"sacctmgr -n -P show account {name} format=account").stdout.split()
        assert shown == [name]
    c.sh("controller", f"sacctmgr -i remove account {account}")


def test_sbatch_renders_a_template(installed: Cluster) -> None:
    out = installed.sh("controller", f"{CLEAN}/slurm-green sbatch --gpus 2 --flex 6h train.py --lr 0.1").stdout
    assert out.startswith("#!") and "#SBATCH --gres=gpu:2" in out and "green:" in out and "train.py" in out


def test_run_once_as_the_operator_releases_a_green_job_in_the_window(installed: Cluster) -> None:
    c = installed
    now = time.time()
    config = write_config(write_carbon(now - 600, now + 3600), "new-admin")
    job = c.sbatch("alice", ["--gres=gpu:1", "-t", "3", "--comment", "green:flex=30m"], "sleep 5\n")
    assert c.job_state(job) == "PENDING"  # job_submit.lua held it to its deadline
    run = c.sh("controller", f"{CLEAN}/slurm-green run --once --config {shlex.quote(config)}",
               user="sgreen", check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert state_of(c, job, {"RUNNING", "COMPLETED"}, timeout=60)
    assert store_rows(c, "new-admin", f"SELECT COUNT(*) FROM decisions WHERE job_id = {job}")[0][0] >= 1
