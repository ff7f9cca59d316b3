"""Slurm hostlist expressions (``node[1-3,5]``) expanded into node names.

Slurm prints allocated nodes compressed; the snapshot needs the individual names to
match jobs to nodes. Only expansion is needed: Slurm accepts plain comma lists back.

Why not python-hostlist (the well-kept library for this): it is GPL-2.0-or-later, and
slurm-green is Apache-2.0; a dependency under the GPL would bind every redistribution
of slurm-green to its terms. Expansion alone is this small module, tested on Slurm's
own outputs of three versions.
"""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


class HostlistError(ValueError):
    """The expression is not a valid Slurm hostlist."""


def _split_top_level(expression: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in expression:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in {expression!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise HostlistError(f"unbalanced '[' in {expression!r}")
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _expand_ranges(body: str, expression: str) -> list[str]:
    """``01-03,7`` -> ``['01', '02', '03', '7']``; zero padding follows the lower bound."""
    values: list[str] = []
    for item in body.split(","):
        match = _RANGE.match(item.strip())
        if not match:
            raise HostlistError(f"bad range {item!r} in {expression!r}")
        low_text, high_text = match.group(1), match.group(2)
        if high_text is None:
            values.append(low_text)
            continue
        low, high = int(low_text), int(high_text)
        if high < low:
            raise HostlistError(f"descending range {item!r} in {expression!r}")
        width = len(low_text) if low_text.startswith("0") else 0
        values.extend(str(number).zfill(width) for number in range(low, high + 1))
    return values


def _expand_one(pattern: str, expression: str) -> list[str]:
    """Expand one comma-free pattern; several bracket groups give their product."""
    start = pattern.find("[")
    if start < 0:
        return [pattern]
    end = pattern.find("]", start)
    if end < 0:
        raise HostlistError(f"unbalanced '[' in {expression!r}")
    prefix, body, rest = pattern[:start], pattern[start + 1 : end], pattern[end + 1 :]
    tails = _expand_one(rest, expression)
    return [f"{prefix}{value}{tail}" for value in _expand_ranges(body, expression) for tail in tails]


def expand(expression: str | None) -> tuple[str, ...]:
    """All node names of a hostlist expression, in Slurm's order, duplicates kept out.

    ``None``, ``""`` and Slurm's ``"(null)"`` mean no nodes.
    """
    if not expression or expression.strip() in ("(null)", "None"):
        return ()
    names: dict[str, None] = {}
    for pattern in _split_top_level(expression.strip()):
        for name in _expand_one(pattern, expression):
            names.setdefault(name, None)
    return tuple(names)
