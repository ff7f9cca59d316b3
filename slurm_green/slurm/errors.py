"""Slurm's error messages mapped to the typed ``ActionError`` a controller can act on.

scontrol prints ``slurm_strerror()`` text and pyslurm's ``RPCError`` carries the same
text, so both backends classify through here.
"""

from __future__ import annotations

from slurm_green.core.actions import ActionError

# Lower-case fragments of slurm_strerror() texts, most specific first.
_PATTERNS: tuple[tuple[str, ActionError], ...] = (
    ("invalid job id specified", ActionError.JOB_GONE),
    ("job has already finished", ActionError.NOT_PENDING),
    ("already completing or completed", ActionError.NOT_PENDING),
    ("job is no longer pending execution", ActionError.NOT_PENDING),
    ("access/permission denied", ActionError.PERMISSION_DENIED),
    ("access denied", ActionError.PERMISSION_DENIED),
    ("invalid user id", ActionError.PERMISSION_DENIED),  # another user's job, as a plain user
    ("unable to contact slurm controller", ActionError.UNREACHABLE),
    ("socket timed out", ActionError.UNREACHABLE),
    ("connection refused", ActionError.UNREACHABLE),
    ("zero bytes were transmitted or received", ActionError.UNREACHABLE),
    ("communication connection failure", ActionError.UNREACHABLE),
    ("slurm backup controller in standby mode", ActionError.UNREACHABLE),
    # docker exec's own failures when the runner is DockerExecRunner
    ("no such container", ActionError.UNREACHABLE),
    ("is not running", ActionError.UNREACHABLE),
    ("invalid generic resource", ActionError.INVALID),
    ("invalid trackable resource", ActionError.INVALID),
    ("invalid node count", ActionError.INVALID),
    ("invalid node name", ActionError.INVALID),
    ("requested node configuration is not available", ActionError.INVALID),
    ("invalid nice value", ActionError.INVALID),
    ("invalid time specification", ActionError.INVALID),
    ("invalid keyword", ActionError.INVALID),
    ("update not supported", ActionError.INVALID),
)


class SlurmError(RuntimeError):
    """Slurm could not be read (a snapshot failed); ``error`` says why in typed form."""

    def __init__(self, error: ActionError, message: str) -> None:
        super().__init__(message)
        self.error = error


def classify(message: str) -> ActionError:
    """The typed reason for a Slurm error message; ``OTHER`` when nothing matches."""
    lowered = message.lower()
    for fragment, error in _PATTERNS:
        if fragment in lowered:
            return error
    return ActionError.OTHER
