"""The attempt deadline unblocks a read on a socket the trace reported, and only after its time;
what has no socket yet is bounded by waiting for it no longer (``call_within``)."""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace

import pytest

from slurm_green.carbon.deadline import AttemptDeadline, Overrun, call_within


def _stream(sock: socket.socket) -> SimpleNamespace:
    """What httpcore's trace hands over: a network stream that names its socket."""
    return SimpleNamespace(get_extra_info=lambda name: sock if name == "socket" else None)


@pytest.mark.timeout(20)
def test_a_blocked_read_returns_when_the_deadline_passes():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        started = time.monotonic()
        with AttemptDeadline(0.3) as deadline:
            deadline.trace("connection.connect_tcp.complete", {"return_value": _stream(ours)})
            assert ours.recv(10) == b""  # the peer never writes: only the deadline ends this read
        assert deadline.expired and 0.25 < time.monotonic() - started < 5


def test_a_socket_reported_after_the_deadline_is_shut_at_once():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        deadline = AttemptDeadline(0.0)
        with deadline:
            time.sleep(0.1)
            deadline.trace("connection.start_tls.complete", {"return_value": _stream(ours)})
            assert ours.recv(10) == b""


def test_an_attempt_within_its_time_is_left_alone():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        with AttemptDeadline(0.2) as deadline:
            deadline.trace("connection.connect_tcp.complete", {"return_value": _stream(ours)})
            deadline.trace("http11.receive_response_headers.started", {"request": None})
        time.sleep(0.4)
        theirs.sendall(b"ok")
        assert ours.recv(10) == b"ok" and not deadline.expired


def test_a_call_within_its_time_gives_its_result_or_its_error():
    assert call_within(5.0, lambda: 42) == 42
    with pytest.raises(KeyError, match="missing"):
        call_within(5.0, lambda: {}["missing"])


def test_a_call_past_its_time_is_left_behind_and_holds_nothing():
    """The caller returns at the time given; the call finishes later on its daemon thread."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        started = time.monotonic()
        with pytest.raises(Overrun, match="no answer after 0.2 s"):
            call_within(0.2, lambda: ours.recv(10), name="stuck")
        assert 0.15 < time.monotonic() - started < 2
        stuck = [thread for thread in threading.enumerate() if thread.name == "stuck"]
        assert stuck and stuck[0].daemon
        theirs.sendall(b"x")  # the call returns now, and its result goes nowhere
        stuck[0].join(5)
        assert not stuck[0].is_alive()
