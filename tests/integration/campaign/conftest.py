"""Campaigns: long fault-injection and hostile-user runs on the Docker cluster.

Every test here is marked ``campaign`` (and ``integration``, by the parent conftest);
``make campaign`` runs them, ``make test`` leaves them out. Each prints its counts
(what was injected, what went wrong: expected 0) so the figures in docs/hardening.md
can be reproduced.
"""
from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.campaign)
