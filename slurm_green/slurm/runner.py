"""How the CLI backend runs Slurm's commands: locally, or inside a container.

The backend never calls ``subprocess`` itself; it is handed a runner. Production
uses ``LocalRunner`` on the controller host; the integration tests and the
benchmark run on the Docker host and reach the cluster with ``DockerExecRunner``.
Every call carries a timeout, so a hung slurmctld cannot hang the controller.

Output is decoded as UTF-8 with ``surrogateescape``, never strictly: job names and
comments are written by users and may hold any byte, and one job named ``\xff`` must
not stop the controller for everyone. The undecodable bytes become lone surrogates
that ``core.text.displayable`` shows as ``\xff`` and that ``subprocess`` turns back
into the same bytes when the controller writes a comment back, so a user's words
round-trip unchanged.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class CommandTimeout(RuntimeError):
    """The command did not finish within its timeout (it was killed)."""


class CommandUnavailable(RuntimeError):
    """The command could not be started (not installed, no such container, ...)."""


class CommandRunner(Protocol):
    # True when commands run on this host (then pyslurm, which uses the local libslurm, may stand in).
    is_local: bool

    def run(self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None) -> CommandResult:
        """Run ``argv`` (no shell) with extra environment ``env``; raise on timeout."""
        ...


def _run(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv),
            capture_output=True,
            encoding="utf-8",
            errors="surrogateescape",
            timeout=timeout,
            env=env,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise CommandTimeout(f"{argv[0]} did not answer within {timeout:g}s: {' '.join(argv)}") from exc
    except OSError as exc:
        raise CommandUnavailable(f"cannot run {argv[0]}: {exc}") from exc


@dataclass(frozen=True)
class LocalRunner:
    """Runs commands on this host (production: the controller runs next to slurmctld)."""

    is_local = True

    def run(self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None) -> CommandResult:
        full_env = {**os.environ, **env} if env else None
        done = _run(argv, timeout, full_env)
        return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class DockerExecRunner:
    """Runs commands inside a container with ``docker exec`` (tests and benchmarks).

    The recorded ``argv`` of a result is the command inside the container, so dry-run
    records and error messages read the same as with ``LocalRunner``.
    """

    is_local = False
    container: str
    user: str | None = None
    docker: str = "docker"
    extra_env: Mapping[str, str] = field(default_factory=dict)

    def command(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        full = [self.docker, "exec"]
        if self.user:
            full += ["--user", self.user]
        for key, value in {**self.extra_env, **(env or {})}.items():
            full += ["--env", f"{key}={value}"]
        return [*full, self.container, *argv]

    def run(self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None) -> CommandResult:
        done = _run(self.command(argv, env), timeout, None)
        return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)
