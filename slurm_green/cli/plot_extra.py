"""The ``--plot`` options' check that matplotlib is there, before any work is done.

matplotlib is the ``plots`` extra: a head node runs the controller without it, so a
``--plot`` there must say in one line how to get it, not fail with an ImportError after
a long run.
"""

from __future__ import annotations

from typing import TypeVar

import click

HINT = "pip install 'slurm-green[plots]'"
_T = TypeVar("_T")


def needs_plots(ctx: click.Context, param: click.Parameter, value: _T) -> _T:
    """Click callback: pass ``value`` through when matplotlib imports, else a usage error."""
    if value is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise click.BadParameter(f"plots need matplotlib, which is not installed: {HINT}") from None
    return value
