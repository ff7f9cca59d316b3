"""Epilog (root, on every node of a job): give the job's GPUs back their earlier limits.

Restores what the Prolog recorded, except on GPUs other jobs still hold (see enact.py),
and removes the job's record. Run as ``python3 -m slurm_green.gpu.epilog``; always exits 0.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from slurm_green.gpu.claims import ClaimStore
from slurm_green.gpu.enact import Log, restore_caps
from slurm_green.gpu.hook import run_hook
from slurm_green.gpu.settings import GpuSettings, open_backend


def epilog(settings: GpuSettings, job_id: int, environ: Mapping[str, str], log: Log) -> None:
    store = ClaimStore(settings.jobs_dir)
    claims = store.load(job_id)
    if claims is None:
        return  # the Prolog changed nothing (no GPUs, or no power control here)
    backend, how = open_backend(settings)
    if backend is None:
        baselines = ", ".join(f"gpu {m}: {c.baseline_w:g} W" for m, c in sorted(claims.gpus.items()))
        log(f"cannot restore ({how}); record dropped, earlier limits were {baselines}")
        with store.locked():
            store.remove(job_id)
        return
    try:
        restore_caps(backend, store, job_id, log)
    finally:
        backend.close()


def main(environ: Mapping[str, str] | None = None) -> int:
    return run_hook("epilog", epilog, environ)


if __name__ == "__main__":
    sys.exit(main())
