"""Checkpoint-on-signal: the handler only raises a flag; the loop polls and acknowledges."""

from __future__ import annotations

import builtins
import os
import signal


from slurm_green.train.signals import CheckpointSignal


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
    flag = CheckpointSignal(signal.SIGUSR2).install()
    try:
        def refuse(*args: object, **kwargs: object) -> None:
            raise AssertionError("I/O inside the signal handler")
        for name in ("open", "print"):
            monkeypatch.setattr(builtins, name, refuse)
        monkeypatch.setattr(os, "write", refuse)
        os.kill(os.getpid(), signal.SIGUSR2)
        monkeypatch.undo()
        assert flag.should_checkpoint()
    finally:
        flag.uninstall()


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
