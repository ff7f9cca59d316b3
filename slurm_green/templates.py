"""Rendering the Jinja2 templates shipped in the repository's ``templates/`` folder."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import jinja2

from slurm_green import __version__


def templates_dir() -> Path:
    """``$SLURM_GREEN_TEMPLATES``, else the checkout's ``templates/``, else the installed copy."""
    candidates = [
        os.environ.get("SLURM_GREEN_TEMPLATES"),
        Path(__file__).resolve().parent.parent / "templates",
        Path(sys.prefix) / "share" / "slurm-green" / "templates",
    ]
    for candidate in candidates:
        if candidate and Path(candidate, "sbatch").is_dir():
            return Path(candidate)
    raise FileNotFoundError("slurm-green templates not found; set SLURM_GREEN_TEMPLATES")


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["shquote"] = lambda value: shlex.quote(str(value))
    env.globals["version"] = __version__
    return env


def render(template: str, **context: object) -> str:
    return environment().get_template(template).render(**context)
