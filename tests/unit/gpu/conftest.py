"""Fixtures of the GPU tests: the fake pynvml installed where ``import pynvml`` finds it."""

from __future__ import annotations

import sys

import pytest
from fake_pynvml import FakeGpu, four_gpus, make_pynvml


@pytest.fixture
def gpus() -> list[FakeGpu]:
    return four_gpus()


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch, gpus: list[FakeGpu]):
    module = make_pynvml(gpus)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node without the NVML binding: ``import pynvml`` raises ImportError."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
