"""A stand-in training job for the live resize test, run on a node by ``srun``: a plain
Python loop (the node image has no PyTorch) using the training helper's torch-free pieces,
as any loop can (docs/training.md): the checkpoint signal, whole-file checkpoints and
progress reports.

Usage: ``elastic_job.py TOTAL CHECKPOINT RESULT``. Each step "trains" 8 samples per GPU
the job holds (``SLURM_JOB_GPUS``) in 0.25 s, so a job restarted on more GPUs goes faster.
SIGUSR2 (the controller's ask): checkpoint at the next step, report it, go on. On start
it resumes from CHECKPOINT if there is one. At the end it writes RESULT: the samples done
and, per run, the GPUs it had, the samples it resumed from and Slurm's restart count.
``--ignore-signal``: a job that does not answer (SIGUSR2 is ignored, nothing is written).
``--frozen=F``: its reports say a share F of its blocks is frozen (as the helper's
``Freezing`` would once front layers converged).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from slurm_green.train.checkpoint import atomic_write
from slurm_green.train.progress import ProgressReporter
from slurm_green.train.signals import CheckpointSignal, Request

PER_GPU = 8


def main(argv: list[str]) -> None:
    ignore = "--ignore-signal" in argv
    frozen = next((float(a.split("=", 1)[1]) for a in argv if a.startswith("--frozen=")), 0.0)
    total, checkpoint, result = int(argv[1]), Path(argv[2]), Path(argv[3])
    gpus = len([g for g in os.environ.get("SLURM_JOB_GPUS", "").split(",") if g])
    state = json.loads(checkpoint.read_text()) if checkpoint.exists() else {"samples": 0, "runs": []}
    state["runs"].append({"gpus": gpus, "from": state["samples"],
                          "restart": int(os.environ.get("SLURM_RESTART_COUNT", "0"))})
    if ignore:
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    asked = CheckpointSignal(keep_going=() if ignore else (signal.SIGUSR2,)).install()
    reporter = ProgressReporter.from_environment(every_s=2.0, total=total)  # its own time left, for the controller
    reporter.update(state["samples"], frozen)
    while state["samples"] < total:
        time.sleep(0.25)
        state["samples"] = min(total, state["samples"] + PER_GPU * max(gpus, 1))
        reporter.update(state["samples"], frozen)
        if asked.take() is Request.KEEP_GOING:
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(checkpoint, lambda handle: handle.write(json.dumps(state).encode()))
            reporter.update(state["samples"], frozen, checkpointed=True)  # after the write: now it may be requeued
    result.write_text(json.dumps(state))


if __name__ == "__main__":
    main(sys.argv)
