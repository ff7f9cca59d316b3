"""Drive the packaged job_submit.lua (slurm_green/job_submit/) in a real Lua 5.1 interpreter through harness.lua.

One interpreter serves a whole module (starting one per case would dominate the
property test); each case sends one request line and reads one answer line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from slurm_green.job_submit import plugin_path

PLUGIN = plugin_path()
HARNESS = Path(__file__).with_name("harness.lua")
LUA = shutil.which("lua5.1")


def _encode(name: str, value: object) -> str:
    if value is None:
        return f"x:{name}="
    if isinstance(value, bool):
        return f"b:{name}={int(value)}"
    if isinstance(value, (int, float)):
        return f"n:{name}={value!r}"
    if isinstance(value, bytes):  # any bytes, as Slurm hands a C string to the plugin
        return f"s:{name}={value.hex()}"
    return f"s:{name}={str(value).encode('utf-8', 'surrogateescape').hex()}"


@dataclass
class Answer:
    rc: int | None = None
    job: dict[str, object] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)
    logs: list[tuple[str, str]] = field(default_factory=list)

    def messages(self, level: str) -> list[str]:
        return [text for lvl, text in self.logs if lvl == level]


class LuaPlugin:
    """The plugin behind a long-lived ``lua5.1 harness.lua`` process."""

    def __init__(self, plugin: Path = PLUGIN) -> None:
        assert LUA is not None
        self._proc = subprocess.Popen(
            [LUA, str(HARNESS), str(plugin)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
        )

    def request(self, command: str, fields: dict[str, object]) -> Answer:
        """``fields``: job_desc fields; ``rec.X`` job_rec fields; ``@X`` harness inputs;
        a value of ``None`` makes reading that job_desc field raise."""
        line = "\t".join([command, *(_encode(name, value) for name, value in fields.items())])
        assert self._proc.stdin and self._proc.stdout
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()
        reply = self._proc.stdout.readline()
        if not reply:
            raise RuntimeError(f"harness died: {self._proc.stderr.read() if self._proc.stderr else ''}")
        return _decode(reply.rstrip("\n"))

    def submit(self, now: int = 1_700_000_000, **job: object) -> Answer:
        job.setdefault("script", "#!/bin/sh\ntrain.py\n")
        return self.request("submit", {"@now": now, **job})

    def modify(self, uid: int, job_rec: dict[str, object], **update: object) -> Answer:
        fields: dict[str, object] = {"@uid": uid, **update}
        fields.update({f"rec.{name}": value for name, value in job_rec.items()})
        return self.request("modify", fields)

    def set(self, **settings: object) -> None:
        self.request("set", settings)

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait(timeout=5)


def _decode(reply: str) -> Answer:
    command, _, rest = reply.partition("\t")
    answer = Answer()
    for item in filter(None, rest.split("\t")):
        kind, _, assignment = item.partition(":")
        name, _, raw = assignment.partition("=")
        value: object
        if kind == "n":
            number = float(raw)
            value = int(number) if number.is_integer() else number
        elif kind == "b":
            value = raw == "1"
        else:
            value = bytes.fromhex(raw).decode("utf-8", errors="surrogateescape")
        if kind == "log":
            answer.logs.append((name, str(value)))
        elif name == "@rc":
            answer.rc = int(value)  # type: ignore[arg-type]
        elif name.startswith("@"):
            answer.extra[name[1:]] = value
        else:
            answer.job[name] = value
    return answer


def start_plugin() -> LuaPlugin:
    if LUA is None:
        message = "lua5.1 is not installed (apt-get install -y lua5.1): job_submit.lua tests cannot run"
        if os.environ.get("SLURM_GREEN_REQUIRE_LUA") == "1":  # `make unit` installs it and insists
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return LuaPlugin()

