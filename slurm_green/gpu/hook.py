"""What the Prolog and the Epilog share: settings, one log line per event, and never failing.

A Prolog or Epilog that fails drains the node, so every error ends here as a log line
and exit status 0; the wrappers slurm.conf names (wrappers.py) add a time bound and a log file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping

from slurm_green.gpu.enact import Log
from slurm_green.gpu.settings import GpuSettings, load_settings

Body = Callable[[GpuSettings, int, Mapping[str, str], Log], None]
#: What a hook does after its body failed (the Epilog: mark its job ended, epilog.py).
Fallback = Callable[[int, Mapping[str, str], Log], None]


def run_hook(kind: str, body: Body, environ: Mapping[str, str] | None = None,
             on_failure: Fallback | None = None) -> int:
    environ = os.environ if environ is None else environ
    job = environ.get("SLURM_JOB_ID", "?")

    def log(message: str) -> None:
        print(f"slurm-green {kind} job={job}: {message}", file=sys.stderr, flush=True)

    try:
        body(load_settings(environ), int(job), environ, log)
    except Exception as exc:  # noqa: BLE001 - the node must stay up whatever happened
        log(f"failed, GPUs left as they are: {type(exc).__name__}: {exc}")
        if on_failure is not None and job.isdigit():
            try:
                on_failure(int(job), environ, log)
            except Exception as again:  # noqa: BLE001 - as above
                log(f"failed again: {type(again).__name__}: {again}")
    return 0
