"""CUDA MPS for jobs Slurm gives ``gres/mps``: the Prolog starts the control daemon and the
job user's server, the Epilog of the node's last MPS job quits the daemon.

What Slurm's own ``etc/prolog.example`` does, made safe for a hook that must never drain a
node: every call of ``nvidia-cuda-mps-control`` is bounded (``TIMEOUT_S``) and any failure
is a log line. An MPS job is one whose Prolog sees ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``
(Slurm sets it for gres/mps, as the example tests). The node's MPS jobs are recorded in
``<state_dir>/mps/<jobid>`` (their uid) under a node-wide lock, so the daemon runs while
one is recorded. Not covered: an Epilog that never ran leaves its record, and the daemon
then stays up until that file is removed (the power caps have a safety net for this,
claims.py; MPS has none yet).

MPS serves **one Linux user at a time**: while a server runs for one uid, another user's
clients wait until it exits (NVIDIA's MPS documentation; measured on an H100,
``shared/data/perf_energy/h100/mps_users.txt``: the second user's job started 26 s later,
when the first one's had ended). The Prolog cannot change that; it says so in the log.
Enabled by ``SLURM_GREEN_MPS_CONTROL`` (the binary's path) in gpu.conf; off by default.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from slurm_green.gpu.enact import Log
from slurm_green.gpu.settings import GpuSettings

TIMEOUT_S = 5.0
#: Set by Slurm in the Prolog's environment of a job with gres/mps (etc/prolog.example).
MPS_MARK = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"


def is_mps_job(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("CUDA_VISIBLE_DEVICES")) and bool(environ.get(MPS_MARK))


class MpsControl:
    """``nvidia-cuda-mps-control``: ``-d`` starts the daemon, commands go on its standard input."""

    def __init__(self, binary: Path, log: Log) -> None:
        self.binary = binary
        self.log = log

    def _run(self, args: list[str], command: str | None, env: Mapping[str, str] | None = None,
             quiet: bool = False) -> bool:
        """Whether it succeeded; a failure, a hang or a missing binary is logged unless ``quiet``."""
        import subprocess  # only here: the Prologs of sites without MPS never need it

        what = f"{self.binary} {' '.join(args) or repr(command)}"
        try:
            done = subprocess.run([str(self.binary), *args], input=command, capture_output=True, text=True,
                                  timeout=TIMEOUT_S, env={**os.environ, **(env or {})}, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            if not quiet:
                self.log(f"mps: {what} failed: {exc}")
            return False
        if done.returncode != 0 and not quiet:
            self.log(f"mps: {what} failed: {(done.stderr or done.stdout).strip() or f'exit status {done.returncode}'}")
        return done.returncode == 0

    def running(self) -> bool:
        """A daemon answers (``get_server_list`` fails without one)."""
        return self._run([], "get_server_list\n", quiet=True)

    def start(self, gpus: str) -> bool:
        """The daemon, seeing only the job's GPUs (Slurm puts MPS on one GPU of a node at a time)."""
        return self._run(["-d"], None, {"CUDA_VISIBLE_DEVICES": gpus})

    def start_server(self, uid: int) -> bool:
        return self._run([], f"start_server -uid {uid}\n")

    def quit(self) -> bool:
        return self._run([], "quit\n")


@contextmanager
def _registry(settings: GpuSettings) -> Iterator[Path]:
    folder = settings.state_dir / "mps"
    folder.mkdir(parents=True, exist_ok=True, mode=0o755)
    with open(folder / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder


def _users(folder: Path) -> dict[int, int]:
    """job id -> uid of the node's recorded MPS jobs (unreadable records are dropped)."""
    found: dict[int, int] = {}
    for path in folder.iterdir():
        if not path.name.isdigit():
            continue
        try:
            found[int(path.name)] = int(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
    return found


def prolog(settings: GpuSettings, job_id: int, environ: Mapping[str, str], log: Log) -> None:
    """For an MPS job: record it, start the daemon if none runs, start its user's server."""
    if settings.mps_control is None or not is_mps_job(environ):
        return
    try:
        uid = int(environ.get("SLURM_JOB_UID", ""))
    except ValueError:
        log("mps: no SLURM_JOB_UID: MPS left as it is")
        return
    control = MpsControl(settings.mps_control, log)
    with _registry(settings) as folder:
        others = {job: user for job, user in _users(folder).items() if job != job_id}
        (folder / str(job_id)).write_text(str(uid))
        if not control.running():
            if not control.start(environ["CUDA_VISIBLE_DEVICES"]):
                return
            log(f"mps: control daemon started for GPUs {environ['CUDA_VISIBLE_DEVICES']}")
        if uid in others.values():
            log(f"mps: the server of uid {uid} already runs")
            return
        busy = sorted(set(others.values()))
        if busy:
            log(f"mps: the server serves uid {busy[0]}; uid {uid}'s clients wait until its jobs end "
                f"(MPS serves one user at a time)")
            return
        if control.start_server(uid):
            log(f"mps: server started for uid {uid}")


def epilog(settings: GpuSettings, job_id: int, environ: Mapping[str, str], log: Log) -> None:
    """Forget the job; the node's last MPS job quits the daemon."""
    if settings.mps_control is None:
        return
    with _registry(settings) as folder:
        record = folder / str(job_id)
        if not record.exists():
            return
        record.unlink()
        left = _users(folder)
        if left:
            log(f"mps: daemon kept for {len(left)} other MPS job(s) on this node")
            return
        control = MpsControl(settings.mps_control, log)
        if control.running() and control.quit():
            log("mps: control daemon quit (no MPS job left on this node)")
