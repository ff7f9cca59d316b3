"""Rendering the Jinja2 templates shipped inside the package (``slurm_green/templates/``).

They live in the package, not beside it, so that a plain ``pip install`` of the wheel carries
them: ``sbatch`` and ``install --print`` work from any install, editable or not.
"""

from __future__ import annotations

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
    env.globals["version"] = __version__
    return env


def render(template: str, **context: object) -> str:
    return environment().get_template(template).render(**context)
