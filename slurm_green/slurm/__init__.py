"""The Slurm adapter: read a consistent ``ClusterSnapshot`` and change pending jobs.

Public API::

    from slurm_green.slurm import make_backend, DockerExecRunner
    backend = make_backend()                       # local commands, pyslurm if it matches
    backend = make_backend(DockerExecRunner("slurmgreen-controller-1"), dry_run=True)
    snapshot = backend.snapshot()                  # raises SlurmError if Slurm is unreachable
    results = backend.apply([SetStartTime(42, start)])   # one ActionResult per action

See docs/slurm-adapter.md.
"""

from slurm_green.slurm.cli_backend import CliBackend
from slurm_green.slurm.errors import SlurmError
from slurm_green.slurm.factory import make_backend
from slurm_green.slurm.pyslurm_backend import PyslurmBackend
from slurm_green.slurm.runner import CommandRunner, DockerExecRunner, LocalRunner

__all__ = [
    "CliBackend",
    "CommandRunner",
    "DockerExecRunner",
    "LocalRunner",
    "PyslurmBackend",
    "SlurmError",
    "make_backend",
]
