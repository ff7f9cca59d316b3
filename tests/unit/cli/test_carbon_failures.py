"""``carbon check`` and ``carbon show`` when a source fails with something other than a CarbonError.

No source the project ships fails so any more (a ``base_url`` whose port was no number made
httpx raise ``InvalidURL`` here until the spec refused such a URL), so the bug is put in the one
place every live source goes through: ``HttpClient.get_json`` raises ``InvalidURL`` quoting the
last segment of its base URL, as httpx quoted the port it refused. The CLI, the chain and the
sources around it are the real ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from slurm_green.carbon.http import HttpClient
from slurm_green.cli import main

#: Wide enough that no table cell wraps, so each row is one line to assert on.
WIDE = {"COLUMNS": "400"}
BUGGY = "ukgrid?base_url=http://127.0.0.1:9/port"
TOKEN = "em-Secret-tok3n"
#: The bug, as Python source: defined here for the tests in this process, put in place first
#: in a child process's (``_cli``).
BUG = """
import httpx
def _buggy_get_json(self, *args, **kwargs):
    raise httpx.InvalidURL(f"Invalid port: {self._base_url.rsplit('/', 1)[1]!r}")
"""


@pytest.fixture(autouse=True)
def buggy_http(monkeypatch):
    scope: dict[str, object] = {}
    exec(BUG, scope)  # noqa: S102 - the test's own literal source
    monkeypatch.setattr(HttpClient, "get_json", scope["_buggy_get_json"])


def error_line(output: str) -> str:
    assert "Traceback" not in output
    [line] = [line for line in output.splitlines() if line.startswith("Error:")]
    return line


def test_check_lists_every_source_before_calling_a_bug_in_one_an_internal_error():
    """The first InvalidURL ended the command: no table, the healthy source after it never shown."""
    result = CliRunner().invoke(main, ["carbon", "check", "--source", f"{BUGGY},synthetic"], env=WIDE)
    assert result.exit_code == 70, result.output
    [bad] = [line for line in result.output.splitlines() if "ukgrid" in line]
    [good] = [line for line in result.output.splitlines() if "synthetic" in line and "│" in line]
    assert "FAIL" in bad and "unexpected InvalidURL: Invalid port: 'port'" in bad
    assert "OK" in good and "SYNTHETIC data" in good
    assert error_line(result.output).startswith("Error: internal error InvalidURL: Invalid port: 'port'")


def test_check_with_debug_gives_the_traceback_after_the_table():
    result = CliRunner().invoke(main, ["--debug", "carbon", "check", "--source", f"{BUGGY},synthetic"], env=WIDE)
    assert type(result.exception).__name__ == "InvalidURL" and "SYNTHETIC data" in result.output


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command in its own process, the bug put in first: no pytest logging handler stands in
    for Python's last-resort one."""
    script = BUG + ("from slurm_green.carbon.http import HttpClient\nHttpClient.get_json = _buggy_get_json\n"
                    "import sys\nfrom slurm_green.cli import main\nsys.argv[0] = 'slurm-green'\nmain()\n")
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **WIDE, **(env or {})})


def test_show_says_a_buggy_chain_member_once_without_a_traceback():
    """The chain's log record of the bug reached stderr through the last-resort handler, traceback and all."""
    done = _cli("carbon", "show", "--hours", "2", "--source", f"{BUGGY},synthetic")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert (done.stdout + done.stderr).count("InvalidURL") == 1
    assert "skipped ukgrid: unexpected InvalidURL: Invalid port: 'port'" in done.stdout
    debug = _cli("--debug", "carbon", "show", "--hours", "2", "--source", f"{BUGGY},synthetic")
    assert debug.returncode == 0 and "Traceback" in debug.stderr and "httpx.InvalidURL" in debug.stderr


@pytest.mark.parametrize("variable", ["ELECTRICITYMAPS_TOKEN", "WATTTIME_PASSWORD"])
@pytest.mark.parametrize("args", [
    ["carbon", "check", "--source", f"ukgrid?base_url=http://127.0.0.1:9/{TOKEN},synthetic"],
    ["carbon", "show", "--source", f"ukgrid?base_url=http://127.0.0.1:9/{TOKEN}"],
    ["carbon", "show", "--json", "--source", f"ukgrid?base_url=http://127.0.0.1:9/{TOKEN},synthetic"],
    ["carbon", "show", "--source", f"ukgrid?base_url=http://127.0.0.1:9/{TOKEN},synthetic"],
])
def test_a_credential_quoted_by_an_unexpected_error_is_never_printed(args, variable):
    """InvalidURL quotes the port it refused: here the credential pasted in the URL."""
    result = CliRunner().invoke(main, args, env={**WIDE, variable: TOKEN})
    assert TOKEN not in result.output and "Invalid port: '***'" in result.output, result.output
    if "--json" in args:
        assert json.loads(result.output)["failures"] == {"ukgrid": "unexpected InvalidURL: Invalid port: '***'"}
