"""Rendering the Jinja2 templates shipped inside the package (``slurm_green/templates/``).

They live in the package, not beside it, so that a plain ``pip install`` of the wheel carries
them: ``sbatch`` and ``install --print`` work from any install, editable or not.
"""

from __future__ import annotations

import re
import shlex

import jinja2

from slurm_green import __version__


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("slurm_green", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["shquote"] = lambda value: shlex.quote(str(value))
    env.filters["sdquote"] = systemd_quoted
    env.globals["version"] = __version__
    return env


def systemd_quoted(value: object) -> str:
    """One word of a systemd unit setting (``ExecStart``, ``ReadWritePaths``): double-quoted
    when it holds whitespace, quotes or backslashes, ``%`` doubled (a specifier otherwise)."""
    text = str(value).replace("%", "%%")
    if text and not re.search(r"[\s\"'\\]", text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(template: str, **context: object) -> str:
    return environment().get_template(template).render(**context)
