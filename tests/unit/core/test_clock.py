import pytest

from slurm_green.core.clock import ManualClock


def test_manual_clock_moves_forward_only():
    clock = ManualClock(100.0)
    clock.advance(5)
    assert clock.now() == 105.0
    with pytest.raises(ValueError, match="backwards"):
        clock.set(50.0)
