"""Write the Prolog and Epilog that slurm.conf names: one self-contained file each.

Why a fixed place outside the repository copy: slurm.conf's ``Prolog=`` must name a file
that exists whatever happens to slurm-green on the node. A Prolog inside the repository
copy drains the node the moment the copy is moved or half-upgraded ("Prolog error").
``/usr/local/libexec/slurm-green`` is where the FHS puts programs a local admin installs
that are run by other programs, not by users: not on anyone's PATH, untouched by the
distribution's packages and by slurm-green's own upgrades, and local to the node (not
/etc/slurm, which configless or NFS-shared sites may not have, or share).

The wrapper (``hook-wrapper.sh``, package data) has its settings written in and sources
nothing; it runs ``python -m slurm_green.gpu.prolog|epilog`` under ``timeout`` and exits 0.
Standard library only: an admin runs this on a node that has the repository copy and a
plain ``python3`` (``python3 -m slurm_green.gpu.wrappers``), or on the head node through
``slurm-green install --hooks DIR``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

HOOKS_DIR = Path("/usr/local/libexec/slurm-green")
KINDS = ("prolog", "epilog")
TEMPLATE = Path(__file__).with_name("hook-wrapper.sh")


@dataclass(frozen=True, slots=True)
class HookSettings:
    """What the wrappers run. ``home`` empty: ``python`` finds slurm_green itself (a venv)."""

    python: str = "/usr/bin/python3"
    home: str = "/opt/slurm-green"
    timeout_s: int = 20
    log: str = "/var/log/slurm-green/hooks.log"

    def __post_init__(self) -> None:
        if not self.python.startswith("/"):
            raise ValueError(f"python {self.python!r}: give an absolute path (slurmd sets no PATH)")
        if self.home and not self.home.startswith("/"):
            raise ValueError(f"home {self.home!r}: give an absolute path, or '' for none")
        if isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, int) or self.timeout_s < 1:
            raise ValueError(f"timeout {self.timeout_s!r}: expected whole seconds >= 1")
        if not self.log.startswith("/"):
            raise ValueError(f"log {self.log!r}: give an absolute path")


DEFAULTS = HookSettings()


def render(kind: str, settings: HookSettings) -> str:
    """The wrapper for ``kind`` (prolog or epilog) with ``settings`` written in."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: expected one of {', '.join(KINDS)}")
    text = TEMPLATE.read_text()
    for name, value in (("KIND", kind), ("PYTHON", shlex.quote(settings.python)),
                        ("HOME", shlex.quote(settings.home)), ("TIMEOUT", str(settings.timeout_s)),
                        ("LOG", shlex.quote(settings.log))):
        text = text.replace(f"@{name}@", value)
    return text


def install(directory: Path, settings: HookSettings) -> list[Path]:
    """Write ``directory/prolog`` and ``directory/epilog`` (0755, replaced atomically)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o755)
    written = []
    for kind in KINDS:
        path = directory / kind
        tmp = path.with_name(f".{kind}.tmp")
        tmp.write_text(render(kind, settings))
        tmp.chmod(0o755)
        os.replace(tmp, path)  # slurmd never sees a half-written hook
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    defaults = DEFAULTS
    parser = argparse.ArgumentParser(prog="python3 -m slurm_green.gpu.wrappers", description=__doc__.split("\n")[0])
    parser.add_argument("directory", nargs="?", type=Path, default=HOOKS_DIR, help=f"default {HOOKS_DIR}")
    parser.add_argument("--python", default=defaults.python, help=f"interpreter on this node (default {defaults.python})")
    parser.add_argument("--home", default=defaults.home,
                        help=f"repository copy put on PYTHONPATH, '' for none (default {defaults.home})")
    parser.add_argument("--timeout", type=int, default=defaults.timeout_s, help=f"seconds (default {defaults.timeout_s})")
    parser.add_argument("--log", default=defaults.log, help=f"log file (default {defaults.log})")
    args = parser.parse_args(argv)
    try:
        settings = HookSettings(args.python, args.home, args.timeout, args.log)
        paths = install(args.directory, settings)
    except (ValueError, OSError) as exc:
        print(f"slurm-green: cannot write the hooks: {exc}", file=sys.stderr)
        return 1
    print("\n".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
