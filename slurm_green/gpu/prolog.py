"""Prolog (PrologFlags=Alloc, root, on every node of a job): cap the job's GPUs.

Where the site enables MPS, it first starts the MPS daemon for a gres/mps job (mps.py).
Reads SLURM_JOB_ID, SLURM_JOB_GPUS and SLURM_JOB_COMMENT; the cap comes from the
controller's signed decision token in the comment (verified with the site key; for a
task of a job array, also its array's, asked of slurmctld), or the site default.
Run as ``python3 -m slurm_green.gpu.prolog``; always exits 0.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from slurm_green.gpu import mps
from slurm_green.gpu.claims import ClaimStore
from slurm_green.gpu.enact import Log, apply_caps, array_job_of, decided_cap, job_gpus
from slurm_green.gpu.hook import run_hook
from slurm_green.gpu.settings import GpuSettings, open_backend


def prolog(settings: GpuSettings, job_id: int, environ: Mapping[str, str], log: Log) -> None:
    try:
        mps.prolog(settings, job_id, environ, log)
    except Exception as exc:  # noqa: BLE001 - MPS trouble must not keep the job's caps from being set
        log(f"mps: failed, left as it is: {type(exc).__name__}: {exc}")
    minors = job_gpus(environ.get("SLURM_JOB_GPUS"))
    if not minors:
        return
    if settings.enactment == "gpu_freq":
        log("enactment is gpu_freq: Slurm applies the job's --gpu-freq, power limits untouched")
        return
    fraction = decided_cap(environ.get("SLURM_JOB_COMMENT", ""), job_id, settings.key_file, settings.default_cap,
                           log, lambda job: array_job_of(job, log))
    backend, how = open_backend(settings)
    if backend is None:
        log(how)
        return
    try:
        log(f"GPUs {minors} via {how}, cap {'none' if fraction is None else f'{fraction:g} of board max'}")
        apply_caps(backend, ClaimStore(settings.jobs_dir), job_id, minors, fraction, log)
    finally:
        backend.close()


def main(environ: Mapping[str, str] | None = None) -> int:
    return run_hook("prolog", prolog, environ)


if __name__ == "__main__":
    sys.exit(main())
