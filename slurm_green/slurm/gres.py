"""GPU and shard counts from Slurm's GRES and TRES strings.

Slurm writes the same request in several spellings depending on the field and the
version: ``gres/gpu:2`` (24.11+ ``tres_per_node``), ``gres:gpu:2`` (22.05),
``gres/gpu:a100:2``, ``gres/gpu=2`` (``tres_req_str``, which may list a typed and an
untyped entry for the same GPUs), node strings like ``gpu:a100:4(S:0)`` and usage like
``gpu:a100:2(IDX:0-1),shard:0(0/4,0/4,0/4,0/4)``. One tolerant parser reads them all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_COUNT = re.compile(r"^(\d+)([KMGTP]?)$", re.IGNORECASE)
_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
#: What a ``mem=4000M`` entry counts per MiB (suffixes are binary, as Slurm's).
MEBI = _SUFFIX["M"]


@dataclass(frozen=True, slots=True)
class GresItem:
    """One entry of a GRES/TRES list: ``name[:type][:count][(detail)]`` or ``name[:type]=count``."""

    name: str
    type: str | None
    count: int
    detail: str = ""


def split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses (``(S:0,1)`` and ``(0/4,0/4)`` stay whole)."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _parse_count(text: str) -> int | None:
    match = _COUNT.match(text.strip())
    if not match:
        return None
    return int(match.group(1)) * _SUFFIX[match.group(2).upper()]


def parse_item(text: str) -> GresItem | None:
    """One entry; ``None`` for text that is not a GRES (``cpu=4`` is returned as name ``cpu``)."""
    text = text.strip()
    for prefix in ("gres/", "gres:"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    detail = ""
    paren = text.find("(")
    if paren >= 0:
        detail = text[paren + 1 :].rstrip(")")
        text = text[:paren]
    if "=" in text:
        head, _, value = text.partition("=")
        count = _parse_count(value)
        if count is None:
            return None
        name, _, typed = head.partition(":")
        return GresItem(name, typed or None, count, detail)
    fields = text.split(":")
    name = fields[0]
    if not name:
        return None
    rest = fields[1:]
    count = 1
    if rest and _parse_count(rest[-1]) is not None:
        count = _parse_count(rest.pop()) or 0
    gres_type = ":".join(rest) or None
    return GresItem(name, gres_type, count, detail)


def parse_list(text: str | None) -> list[GresItem]:
    """All entries of a GRES/TRES string; empty or ``(null)`` gives ``[]``."""
    if not text or text.strip() in ("(null)", "N/A"):
        return []
    items = (parse_item(part) for part in split_top_level(text))
    return [item for item in items if item is not None]


def count(text: str | None, name: str) -> tuple[int, str | None]:
    """Units of GRES ``name`` (``gpu`` or ``shard``) and its type, if one is named.

    When a string lists both an untyped total and typed entries (``tres_req_str`` does:
    ``gres/gpu=2,gres/gpu:a100=2``) the untyped total is used, so nothing is counted twice.
    """
    items = [item for item in parse_list(text) if item.name == name]
    untyped = [item for item in items if item.type is None]
    typed = [item for item in items if item.type is not None]
    chosen = untyped or typed
    gres_type = typed[0].type if typed else None
    return sum(item.count for item in chosen), gres_type


def indices(detail: str) -> tuple[int, ...]:
    """Device indices from a usage detail such as ``IDX:0-1,3``; ``IDX:N/A`` gives ``()``."""
    if not detail.startswith("IDX:"):
        return ()
    found: set[int] = set()
    for item in detail[len("IDX:") :].split(","):
        match = _RANGE.match(item.strip())
        if match:
            low = int(match.group(1))
            found.update(range(low, int(match.group(2) or low) + 1))
    return tuple(sorted(found))


def used_indices(text: str | None, name: str = "gpu") -> tuple[int, ...]:
    """Allocated device indices of GRES ``name`` in a node's ``gres_used`` string."""
    found: set[int] = set()
    for item in parse_list(text):
        if item.name == name:
            found.update(indices(item.detail))
    return tuple(sorted(found))


class UnsafeGres(ValueError):
    """A job's GRES request that cannot be read back entry by entry, so cannot be rewritten safely."""


# One entry of a job's per-node request in ``scontrol update Gres=`` spelling:
# ``name[:type][:count]`` (``nvme``, ``nvme:1``, ``gpu:h100:4``, ``bandwidth:lustre:4G``).
# Conservative on purpose: the text comes from users' submissions.
_REQUEST_ENTRY = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}(?::[A-Za-z0-9_.-]{1,64}){0,2}")


def request_entries(text: str | None) -> tuple[str, ...]:
    """A job's per-node GRES request (``tres_per_node``) as entries in ``Gres=`` spelling.

    Every version's spelling is read: ``gres/gpu:4,gres/nvme:1`` (24.11+), ``gres:gpu:4``
    (22.05), ``gpu:4`` (pyslurm); each entry loses its ``gres/`` or ``gres:`` prefix and is
    otherwise kept verbatim (type and count as written). Empty, ``(null)`` and ``N/A``
    give ``()``. Anything but comma-separated ``name[:type][:count]`` entries of letters,
    digits, ``_``, ``.`` and ``-`` raises ``UnsafeGres``: the string is user-written,
    and a request not understood entry by entry must be left as it is.
    """
    value = (text or "").strip()
    if value in ("", "(null)", "N/A"):
        return ()
    entries: list[str] = []
    for part in value.split(","):
        entry = part[len("gres/") :] if part.startswith(("gres/", "gres:")) else part
        if not _REQUEST_ENTRY.fullmatch(entry):
            raise UnsafeGres(f"GRES request {value[:80]!r}: entry {part[:40]!r} is not name[:type][:count]")
        entries.append(entry)
    return tuple(entries)


def request_name(entry: str) -> str:
    """The GRES name of a ``request_entries`` entry (``nvme`` of ``nvme:ssd:1``)."""
    return entry.partition(":")[0]
