"""One place that turns the project's failures into one line and an exit code.

Commands raise what they raise (``SlurmError``, ``CarbonError``, ``ConfigError``...);
:class:`ErrorMappingGroup` catches them at the top of ``slurm-green`` and prints
``Error: <what is wrong>; <what to do>`` on stderr, exit 1. Anything else is a bug
in slurm-green: one line saying so, exit 70 (``EX_SOFTWARE``). Either line has the carbon
credentials of the environment masked. ``--debug`` lets the exception through, so
Python prints the traceback. Doing it here, once, keeps the
commands free of try/except and the messages alike across commands (a new admin
first meets slurm-green through these lines, usually without Slurm reachable yet).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import click

from slurm_green.carbon.errors import AuthError, CarbonError, SourceSpecError
from slurm_green.carbon.secrets import CarbonSecrets
from slurm_green.controller.config import ConfigError
from slurm_green.controller.single_instance import ControllerRunning
from slurm_green.core.actions import ActionError
from slurm_green.core.green_options import GreenOptionError
from slurm_green.slurm.errors import SlurmError
from slurm_green.slurm.runner import CommandTimeout, CommandUnavailable

#: A known failure: the user can fix it; the line says how.
EXIT_ERROR = 1
#: An unexpected exception: a bug in slurm-green (sysexits.h EX_SOFTWARE).
EXIT_BUG = 70

_SLURM_HINTS = {
    ActionError.UNREACHABLE: "is slurmctld up and reachable from here? (scontrol ping)",
    ActionError.PERMISSION_DENIED: "run as the controller's service user, which needs operator rights "
                                   "(docs/deploy.md)",
}
_SLURM_HINT = "run this on a host where Slurm's commands (squeue, scontrol) are on PATH and work"


def _slurm(exc: SlurmError) -> str:
    return f"cannot read Slurm ({exc.error.value}): {exc}; {_SLURM_HINTS.get(exc.error, _SLURM_HINT)}"


def _os(exc: OSError) -> str:
    return f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)


#: Most specific first: the first class an exception is an instance of gives its line.
_MESSAGES: tuple[tuple[type[BaseException], Callable[[Any], str]], ...] = (
    (SlurmError, _slurm),
    (CommandUnavailable, lambda e: f"{e}; is Slurm's client installed on this host?"),
    (CommandTimeout, lambda e: f"{e}; slurmctld may be overloaded or down (scontrol ping)"),
    (AuthError, lambda e: f"carbon source credentials: {e}"),
    (SourceSpecError, lambda e: f"carbon source: {e} (sources come from --source or the config's [carbon] sources; "
                                "docs/carbon.md lists them)"),
    (CarbonError, lambda e: f"carbon: {e}; `slurm-green carbon check` tests each source"),
    (ConfigError, str),
    (ControllerRunning, str),
    (GreenOptionError, str),
    (sqlite3.Error, lambda e: f"state database: {e}; check [controller] state_db and that this user may write it"),
    (OSError, _os),
)


def one_line(text: str) -> str:
    """Several lines (a ConfigError lists each bad key) joined into one with ``; ``."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def describe(exc: BaseException) -> tuple[str, int]:
    """The one line and the exit code for ``exc``."""
    for kind, message in _MESSAGES:
        if isinstance(exc, kind):
            return one_line(message(exc)), EXIT_ERROR
    return (one_line(f"internal error {type(exc).__name__}: {exc}")
            + " (a bug in slurm-green: rerun with --debug and report the traceback)", EXIT_BUG)


class CliError(click.ClickException):
    """A ClickException with its own exit code (click prints ``Error: message``)."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        # click reads the code from the instance; its annotations declare it a class constant.
        self.exit_code = exit_code  # type: ignore[misc]


class ErrorMappingGroup(click.Group):
    """The top-level group: every failure of every subcommand becomes one line (see the module docstring)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:
            if ctx.params.get("debug"):
                raise
            message, code = describe(exc)
            # An unexpected exception's text is a library's: it may quote a credential it was handed.
            raise CliError(CarbonSecrets.load().masked(message), code) from exc
