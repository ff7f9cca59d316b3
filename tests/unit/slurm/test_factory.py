import logging

import pytest
from test_pyslurm_backend import FakePyslurm

from slurm_green.slurm import factory
from slurm_green.slurm.cli_backend import CliBackend
from slurm_green.slurm.factory import major_minor, make_backend
from slurm_green.slurm.pyslurm_backend import PyslurmBackend
from slurm_green.slurm.runner import CommandResult, DockerExecRunner


class VersionRunner:
    """A local runner whose `scontrol version` answers a chosen version."""

    is_local = True

    def __init__(self, version: str) -> None:
        self.version = version

    def run(self, argv, *, timeout, env=None):
        return CommandResult(tuple(argv), 0, f"slurm-wlm {self.version}\n", "")


@pytest.mark.parametrize(
    ("text", "expected"), [("slurm-wlm 24.11.5", "24.11"), ("22.5.8", "22.05"), ("25.11", "25.11"), ("", None)]
)
def test_major_minor(text, expected):
    assert major_minor(text) == expected


def test_pyslurm_chosen_when_versions_match(caplog):
    caplog.set_level(logging.INFO)
    backend = make_backend(VersionRunner("25.11.2"), pyslurm_module=FakePyslurm())
    assert isinstance(backend, PyslurmBackend)
    assert "matches Slurm 25.11" in caplog.text


def test_cli_when_versions_differ(caplog):
    caplog.set_level(logging.INFO)
    backend = make_backend(VersionRunner("24.11.5"), pyslurm_module=FakePyslurm())
    assert isinstance(backend, CliBackend)
    assert "pyslurm 25.11 does not match Slurm 24.11" in caplog.text


def test_cli_through_docker_and_on_request():
    assert isinstance(make_backend(DockerExecRunner("c"), pyslurm_module=FakePyslurm()), CliBackend)
    assert isinstance(make_backend(VersionRunner("25.11.2"), prefer="cli", pyslurm_module=FakePyslurm()), CliBackend)


def test_pyslurm_demanded_but_unusable():
    with pytest.raises(RuntimeError, match="does not match"):
        make_backend(VersionRunner("24.11.5"), prefer="pyslurm", pyslurm_module=FakePyslurm())


def test_dry_run_is_passed_on():
    assert make_backend(DockerExecRunner("c"), dry_run=True).dry_run


def test_cli_when_pyslurm_is_not_installed(monkeypatch, caplog):
    def no_pyslurm(name):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(factory.importlib, "import_module", no_pyslurm)
    caplog.set_level(logging.INFO)
    assert isinstance(make_backend(VersionRunner("25.11.2")), CliBackend)
    assert "pyslurm is not installed" in caplog.text


def test_a_write_prefix_keeps_the_cli_backend():
    backend = make_backend(VersionRunner("25.11.2"), prefer="auto", pyslurm_module=FakePyslurm(),
                           write_prefix=("sudo", "-n"))
    assert isinstance(backend, CliBackend) and backend.write_prefix == ("sudo", "-n")
