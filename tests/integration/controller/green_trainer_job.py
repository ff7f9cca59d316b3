"""A real PyTorch training job for the live resize test, run on a node by ``srun``: a small
MLP trained by the training helper's adapter (``GreenTrainer``, docs/training.md), on CPU
(the node image's Debian PyTorch; the GPUs are emulated).

Usage: ``green_trainer_job.py STEPS CHECKPOINT_DIR RESULT``. Each optimizer step takes a
global batch of 8 samples and sleeps 0.25 s divided by the GPUs the job holds
(``SLURM_JOB_GPUS``), so a job restarted on more GPUs goes faster, as a GPU job would.
GreenTrainer checkpoints on SIGUSR2 (the controller's ask) and trains on, and resumes from
CHECKPOINT_DIR on start. At the end RESULT holds the samples and steps done, the final
loss and, per run, the GPUs it had, the samples it resumed from and Slurm's restart count.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

from slurm_green.train.checkpoint import atomic_write
from slurm_green.train.progress import ProgressReporter
from slurm_green.train.pytorch import GreenTrainer

BATCH = 8


def main(argv: list[str]) -> None:
    steps, checkpoint_dir, result = int(argv[1]), Path(argv[2]), Path(argv[3])
    gpus = len([g for g in os.environ.get("SLURM_JOB_GPUS", "").split(",") if g])
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    data = TensorDataset(x, x.sum(dim=1, keepdim=True))  # a target the MLP can learn
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    green = GreenTrainer(model, optimizer, global_batch=BATCH, checkpoint_dir=checkpoint_dir,
                         reporter=ProgressReporter.from_environment(every_s=2.0))
    runs_file = checkpoint_dir / "runs.json"
    runs = json.loads(runs_file.read_text()) if runs_file.exists() else []
    runs.append({"gpus": gpus, "from": green.samples, "restart": int(os.environ.get("SLURM_RESTART_COUNT", "0"))})
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(runs_file, lambda handle: handle.write(json.dumps(runs).encode()))
    loss_fn = nn.MSELoss()
    for inputs, target in green.batches(data, steps=steps, micro_batch=BATCH):
        green.backward(loss_fn(model(inputs), target))
        time.sleep(0.25 / max(gpus, 1))
    if green.interrupted:
        sys.exit(0)
    with torch.no_grad():
        loss = float(loss_fn(model(x), data.tensors[1]))
    result.write_text(json.dumps({"samples": green.samples, "steps": green.step, "loss": loss, "runs": runs}))


if __name__ == "__main__":
    main(sys.argv)
