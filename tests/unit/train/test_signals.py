"""Checkpoint-on-signal: the handler only raises a flag; the loop polls and acknowledges."""

from __future__ import annotations

import builtins
import os
import signal


import pytest

from slurm_green.train.signals import CheckpointSignal, Request


def test_the_signal_sets_the_flag_until_acknowledged_and_uninstall_restores() -> None:
    before = signal.getsignal(signal.SIGUSR1)
    flag = CheckpointSignal().install()
    try:
        assert not flag.should_checkpoint()
        os.kill(os.getpid(), signal.SIGUSR1)
        assert flag.should_checkpoint() and flag.should_checkpoint()   # polling does not clear it
        flag.acknowledge()
        assert not flag.should_checkpoint()
    finally:
        flag.uninstall()
    assert signal.getsignal(signal.SIGUSR1) == before


def test_the_handler_does_no_io(monkeypatch) -> None:
    flag = CheckpointSignal().install()
    try:
        def refuse(*args: object, **kwargs: object) -> None:
            raise AssertionError("I/O inside the signal handler")
        for name in ("open", "print"):
            monkeypatch.setattr(builtins, name, refuse)
        monkeypatch.setattr(os, "write", refuse)
        os.kill(os.getpid(), signal.SIGUSR2)
        monkeypatch.undo()
        assert flag.should_checkpoint() and flag.take() is Request.KEEP_GOING
    finally:
        flag.uninstall()


def test_usr1_asks_to_stop_usr2_to_keep_going_and_take_clears_what_it_returns() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2)}
    flag = CheckpointSignal().install()
    try:
        assert flag.take() is None and flag.requested() is None
        os.kill(os.getpid(), signal.SIGUSR2)
        assert flag.requested() is Request.KEEP_GOING and flag.should_checkpoint()
        assert flag.take() is Request.KEEP_GOING
        assert flag.take() is None                                  # taken: cleared
        os.kill(os.getpid(), signal.SIGUSR2)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert flag.requested() is Request.STOP                     # stop wins
        assert flag.take() is Request.STOP
        assert flag.take() is None                                  # its checkpoint answered the keep-going too
        os.kill(os.getpid(), signal.SIGUSR1)
        assert flag.should_checkpoint()
        flag.acknowledge()
        assert not flag.should_checkpoint()
    finally:
        flag.uninstall()
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_signal_after_take_is_a_new_request() -> None:
    """A keep-going signal landing while the checkpoint is written asks again at the next step."""
    flag = CheckpointSignal().install()
    try:
        os.kill(os.getpid(), signal.SIGUSR2)
        assert flag.take() is Request.KEEP_GOING
        os.kill(os.getpid(), signal.SIGUSR2)          # during the write
        os.kill(os.getpid(), signal.SIGUSR1)
        assert flag.take() is Request.STOP
        os.kill(os.getpid(), signal.SIGUSR2)
        assert flag.take() is Request.KEEP_GOING
    finally:
        flag.uninstall()


def test_the_signals_are_the_callers_choice() -> None:
    before = signal.getsignal(signal.SIGUSR2)
    flag = CheckpointSignal(stop=(signal.SIGUSR2,), keep_going=()).install()
    try:
        os.kill(os.getpid(), signal.SIGUSR2)
        assert flag.take() is Request.STOP
    finally:
        flag.uninstall()
    assert signal.getsignal(signal.SIGUSR2) == before
    with pytest.raises(ValueError, match="SIGUSR2"):
        CheckpointSignal(stop=(signal.SIGUSR2,))             # the default keep_going has it too
    with pytest.raises(TypeError):
        CheckpointSignal(signal.SIGUSR1)  # type: ignore[arg-type]


def test_install_outside_the_main_thread_is_refused() -> None:
    import threading

    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _try(errors))
    thread.start()
    thread.join()
    assert errors and isinstance(errors[0], ValueError)


def _try(errors: list[BaseException]) -> None:
    try:
        CheckpointSignal().install()
    except BaseException as exc:  # noqa: BLE001 - the test inspects it
        errors.append(exc)
