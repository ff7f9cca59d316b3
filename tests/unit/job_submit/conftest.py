"""Fixtures for the job_submit.lua tests (the driver is lua_plugin.py)."""

from __future__ import annotations

import pytest
from lua_plugin import start_plugin


@pytest.fixture(scope="module")
def plugin():
    """One Lua interpreter for a whole test module, with the shipped site settings."""
    lua = start_plugin()
    yield lua
    lua.close()


@pytest.fixture
def fresh_plugin():
    """A plugin process of its own, for tests that change site settings."""
    lua = start_plugin()
    yield lua
    lua.close()
