import pytest

from policy_literals import LiteralModels


@pytest.fixture
def models() -> LiteralModels:
    return LiteralModels()
