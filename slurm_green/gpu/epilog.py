"""Epilog (root, on every node of a job): give the job's GPUs back their earlier limits.

The node's last MPS job quits the MPS daemon where the site enables it (mps.py).
Restores what the Prolog recorded, except on GPUs other jobs still hold (see enact.py),
and removes the job's record; with the record lost, the baselines kept apart say what
to restore (claims.py). With ``SLURM_GREEN_TELEMETRY_DIR`` set it also leaves the
job's metered GPU energy on this node there for the controller (core/telemetry.py).
Run as ``python3 -m slurm_green.gpu.epilog``; always exits 0.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Mapping

from slurm_green.core import telemetry
from slurm_green.gpu import mps
from slurm_green.gpu.claims import ClaimStore
from slurm_green.gpu.enact import Log, job_gpus, restore_caps
from slurm_green.gpu.hook import run_hook
from slurm_green.gpu.settings import GpuSettings, jobs_dir, open_backend


def epilog(settings: GpuSettings, job_id: int, environ: Mapping[str, str], log: Log) -> None:
    try:
        mps.epilog(settings, job_id, environ, log)
    except Exception as exc:  # noqa: BLE001 - MPS trouble must not keep the GPUs' limits from coming back
        log(f"mps: failed, left as it is: {type(exc).__name__}: {exc}")
    store = ClaimStore(settings.jobs_dir)
    minors = job_gpus(environ.get("SLURM_JOB_GPUS"))
    claims = store.load(job_id)
    if claims is None and not set(minors) & store.baselines().keys():
        return  # the Prolog changed nothing (no GPUs, or no power control here)
    try:
        store.mark_ended(job_id)
    except OSError as exc:  # a full /var: the GPUs' limits need no disk, they come back first
        log(f"could not mark the job ended ({exc}); restoring its GPUs all the same")
    backend, how = open_backend(settings)
    if backend is None:
        gpus = claims.gpus if claims else {}
        baselines = ", ".join(f"gpu {m}: {c.baseline_w:g} W" for m, c in sorted(gpus.items()))
        log(f"cannot restore ({how}); record dropped, earlier limits were {baselines or 'unknown'}")
        with store.locked():
            store.remove(job_id)
        return
    try:
        measured = restore_caps(backend, store, job_id, _node_name(environ), log, minors)
    finally:
        backend.close()
    if settings.telemetry_dir is None:
        return
    if measured is None:
        log("no energy reading for every GPU: nothing left for the controller")
        return
    try:
        path = telemetry.write(settings.telemetry_dir, measured)
    except OSError as exc:
        log(f"could not leave the energy reading in {settings.telemetry_dir}: {exc}")
        return
    log(f"{measured.energy_j:.0f} J on {measured.gpus} GPU(s) over {measured.seconds:.0f} s -> {path}")


def _node_name(environ: Mapping[str, str]) -> str:
    """Slurm's name for this node (SLURMD_NODENAME), else the short host name."""
    return environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _mark_ended(job_id: int, environ: Mapping[str, str], log: Log) -> None:
    """After a failure (a bad setting, an unreadable gpu.conf...): say that the job has left, so
    the next hook on the node releases its claims and restores the GPUs no live job holds.
    Exiting 0, this process gets no marker from the wrapper; unmarked, the job's record would
    hold its GPUs (and keep them at its cap after later jobs) until a reboot."""
    store = ClaimStore(jobs_dir(environ))
    if store.load(job_id) is not None:
        store.mark_ended(job_id, given_up=True)
        log("job marked ended: the next Prolog or Epilog here restores its GPUs")


def main(environ: Mapping[str, str] | None = None) -> int:
    return run_hook("epilog", epilog, environ, on_failure=_mark_ended)


if __name__ == "__main__":
    sys.exit(main())
