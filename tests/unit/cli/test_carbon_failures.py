"""``carbon check`` and ``carbon show`` when a source fails with something other than a CarbonError.

The failing source is real: a ``base_url`` whose port is no number makes httpx raise
``InvalidURL`` (no TransportError, so the client passes it on untyped) before any connection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from slurm_green.cli import main

#: Wide enough that no table cell wraps, so each row is one line to assert on.
WIDE = {"COLUMNS": "400"}
BAD_PORT = "ukgrid?base_url=http://127.0.0.1:port"
TOKEN = "em-Secret-tok3n"


def error_line(output: str) -> str:
    assert "Traceback" not in output
    [line] = [line for line in output.splitlines() if line.startswith("Error:")]
    return line


def test_check_lists_every_source_before_calling_a_bug_in_one_an_internal_error():
    """The first InvalidURL ended the command: no table, the healthy source after it never shown."""
    result = CliRunner().invoke(main, ["carbon", "check", "--source", f"{BAD_PORT},synthetic"], env=WIDE)
    assert result.exit_code == 70, result.output
    [bad] = [line for line in result.output.splitlines() if "ukgrid" in line]
    [good] = [line for line in result.output.splitlines() if "synthetic" in line and "│" in line]
    assert "FAIL" in bad and "unexpected InvalidURL: Invalid port: 'port'" in bad
    assert "OK" in good and "SYNTHETIC data" in good
    assert error_line(result.output).startswith("Error: internal error InvalidURL: Invalid port: 'port'")


def test_check_with_debug_gives_the_traceback_after_the_table():
    result = CliRunner().invoke(main, ["--debug", "carbon", "check", "--source", f"{BAD_PORT},synthetic"], env=WIDE)
    assert type(result.exception).__name__ == "InvalidURL" and "SYNTHETIC data" in result.output


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command as installed: no pytest logging handler stands in for Python's last-resort one."""
    return subprocess.run([sys.executable, "-m", "slurm_green.cli", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **WIDE, **(env or {})})


def test_show_says_a_buggy_chain_member_once_without_a_traceback():
    """The chain's log record of the bug reached stderr through the last-resort handler, traceback and all."""
    done = _cli("carbon", "show", "--hours", "2", "--source", f"{BAD_PORT},synthetic")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert (done.stdout + done.stderr).count("InvalidURL") == 1
    assert "skipped ukgrid: unexpected InvalidURL: Invalid port: 'port'" in done.stdout
    debug = _cli("--debug", "carbon", "show", "--hours", "2", "--source", f"{BAD_PORT},synthetic")
    assert debug.returncode == 0 and "Traceback" in debug.stderr and "httpx.InvalidURL" in debug.stderr


@pytest.mark.parametrize("variable", ["ELECTRICITYMAPS_TOKEN", "WATTTIME_PASSWORD"])
@pytest.mark.parametrize("args", [
    ["carbon", "check", "--source", f"ukgrid?base_url=http://127.0.0.1:{TOKEN},synthetic"],
    ["carbon", "show", "--source", f"ukgrid?base_url=http://127.0.0.1:{TOKEN}"],
    ["carbon", "show", "--json", "--source", f"ukgrid?base_url=http://127.0.0.1:{TOKEN},synthetic"],
    ["carbon", "show", "--source", f"ukgrid?base_url=http://127.0.0.1:{TOKEN},synthetic"],
])
def test_a_credential_quoted_by_an_unexpected_error_is_never_printed(args, variable):
    """InvalidURL quotes the port it refused: here the credential pasted in its place."""
    result = CliRunner().invoke(main, args, env={**WIDE, variable: TOKEN})
    assert TOKEN not in result.output and "Invalid port: '***'" in result.output, result.output
    if "--json" in args:
        assert json.loads(result.output)["failures"] == {"ukgrid": "unexpected InvalidURL: Invalid port: '***'"}
