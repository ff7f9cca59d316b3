import sys

import pytest

from slurm_green.slurm.runner import CommandTimeout, CommandUnavailable, DockerExecRunner, LocalRunner


def test_local_runner_passes_argv_and_env_without_a_shell():
    code = "import os, sys; print(sys.argv[1]); print(os.environ['TZ']); sys.exit(3)"
    result = LocalRunner().run([sys.executable, "-c", code, "a b;c"], timeout=10, env={"TZ": "UTC0"})
    assert result.returncode == 3 and not result.ok
    assert result.stdout.splitlines() == ["a b;c", "UTC0"]


def test_local_runner_times_out():
    with pytest.raises(CommandTimeout):
        LocalRunner().run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.2)


def test_missing_command():
    with pytest.raises(CommandUnavailable):
        LocalRunner().run(["/nonexistent/scontrol", "version"], timeout=5)


def test_docker_exec_command_line():
    runner = DockerExecRunner("slurmgreen-2411-controller", user="sgreen")
    argv = runner.command(["scontrol", "update", "JobId=1", "Comment=two words"], {"TZ": "UTC0"})
    assert argv == [
        "docker",
        "exec",
        "--user",
        "sgreen",
        "--env",
        "TZ=UTC0",
        "slurmgreen-2411-controller",
        "scontrol",
        "update",
        "JobId=1",
        "Comment=two words",
    ]


def test_bytes_that_are_not_utf8_are_read_and_written_back_unchanged():
    """A user's comment with \\xe9 or \\xff must neither stop a read (it did: UnicodeDecodeError)
    nor change when the controller writes it back as an argument."""
    echo = "import sys; sys.stdout.buffer.write(b'caf\\xe9 \\xff ok'); sys.stderr.buffer.write(sys.argv[1].encode('utf-8', 'surrogateescape'))"
    first = LocalRunner().run([sys.executable, "-c", echo, "x"], timeout=10)
    assert first.ok and first.stdout.endswith(" ok")
    again = LocalRunner().run([sys.executable, "-c", echo, first.stdout], timeout=10)
    assert again.stderr.encode("utf-8", "surrogateescape") == b"caf\xe9 \xff ok"
