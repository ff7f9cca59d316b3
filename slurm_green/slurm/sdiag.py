"""slurmctld's RPC counters from ``sdiag``: how we measure what a snapshot costs.

``sdiag`` lists how many RPCs slurmctld has served since its counters were reset,
per message type and per user. The difference of two readings is the cost of what
ran in between, plus noise: ``sdiag`` is itself an RPC (REQUEST_STATS_INFO), Docker
health checks run ``scontrol ping`` (REQUEST_PING) as root, and compute nodes send
their own messages. The clean measure is per user: run the snapshot as a user that
nothing else uses (the controller's account) and count that user's RPCs; the
per-type difference then says which RPCs they were.

Both ``sdiag`` text (all versions) and ``sdiag --json`` (24.11+) are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

_LINE = re.compile(r"^\s*(\S+)\s*\(\s*\d+\)\s*count:\s*(\d+)(?:.*?total_time:\s*(\d+))?")
_SECTIONS = {
    "Remote Procedure Call statistics by message type": "by_type",
    "Remote Procedure Call statistics by user": "by_user",
}


@dataclass(frozen=True, slots=True)
class RpcCounts:
    by_type: dict[str, int]
    by_user: dict[str, int]
    #: slurmctld's time serving each message type, microseconds (what a plugin adds shows here).
    time_us_by_type: dict[str, int]


def _from_json(document: Mapping[str, object]) -> RpcCounts:
    statistics = document.get("statistics")
    statistics = statistics if isinstance(statistics, Mapping) else {}
    by_type = {
        str(item.get("message_type")): int(item.get("count", 0))
        for item in statistics.get("rpcs_by_message_type") or []
        if isinstance(item, Mapping)
    }
    by_user = {
        str(item.get("user")): int(item.get("count", 0))
        for item in statistics.get("rpcs_by_user") or []
        if isinstance(item, Mapping)
    }
    time_us = {
        str(item.get("message_type")): int(item.get("total_time", 0))
        for item in statistics.get("rpcs_by_message_type") or []
        if isinstance(item, Mapping)
    }
    return RpcCounts(by_type, by_user, time_us)


def _from_text(text: str) -> RpcCounts:
    sections: dict[str, dict[str, int]] = {"by_type": {}, "by_user": {}}
    time_us: dict[str, int] = {}
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Remote Procedure Call statistics"):
            current = _SECTIONS.get(stripped)
            continue
        if current is None:
            continue
        match = _LINE.match(line)
        if match:
            sections[current][match.group(1)] = int(match.group(2))
            if current == "by_type" and match.group(3) is not None:
                time_us[match.group(1)] = int(match.group(3))
        elif stripped and not line.startswith((" ", "\t")):
            current = None
    return RpcCounts(sections["by_type"], sections["by_user"], time_us)


def rpc_counts(output: str) -> RpcCounts:
    """Counters from ``sdiag`` or ``sdiag --json`` output."""
    if output.lstrip().startswith("{"):
        return _from_json(json.loads(output))
    return _from_text(output)


def difference(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """What grew between two readings (names that appear only later count from 0)."""
    grown = {name: count - before.get(name, 0) for name, count in after.items()}
    return {name: count for name, count in grown.items() if count > 0}
