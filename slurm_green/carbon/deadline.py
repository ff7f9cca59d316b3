"""A limit on a whole HTTP attempt, headers included, which httpx's timeouts do not give.

httpx's ``timeout`` bounds each connect, write and read, not the answer: a server (or a proxy)
sending its status line and headers a byte every few seconds holds the request for hours
(h11 accepts up to 16 KiB of headers), and with it the refresh thread and the chain's
fall-through to the next source. Reading the body in chunks cannot help there: the headers
are read inside httpx, before the response is handed back.

So each attempt runs under an :class:`AttemptDeadline`: httpx's ``trace`` extension reports
every socket the attempt opens, and when the deadline passes a timer shuts those sockets
down. A read blocked on one returns at once, httpx raises a transport error, and the client
reports the attempt as timed out (:attr:`AttemptDeadline.expired`). Shutting a socket down
from another thread is what makes a blocked ``recv`` return on every platform the controller
runs on; closing it would not.

What comes before the first socket has nothing to shut: the host name's lookup
(``getaddrinfo``, which a resolver that drops queries, or an NSS module hung on a directory
server, holds for as long as it likes, and which no timeout or signal interrupts in a
thread) and the connect attempts to each of its addresses. :func:`call_within` bounds
those: the attempt runs on a thread of its own, and the caller stops waiting for it.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

#: httpcore's trace events whose ``return_value`` is the network stream of a new connection.
_STREAM_EVENTS = ("connection.connect_tcp.complete", "connection.start_tls.complete",
                  "connection.connect_unix_socket.complete")


class AttemptDeadline:
    """Shuts down every socket an attempt opened once ``seconds`` have passed since ``__enter__``.

    Use as a context manager around one request, passing :meth:`trace` as the request's
    ``extensions={"trace": ...}``; connections must not be reused across attempts (a reused
    one opens no socket the trace could report).
    """

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> AttemptDeadline:
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._timer.cancel()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx's trace hook: note the socket of each new connection (shut at once if already late)."""
        if event not in _STREAM_EVENTS or info.get("return_value") is None:
            return
        sock = info["return_value"].get_extra_info("socket")
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    """Shut a socket down for both directions, at the OS level: for a TLS socket, ``SSLSocket.shutdown``
    would also drop its SSL object under the thread reading it (an AttributeError there, not a
    transport error), so the plain socket's method is called on its file descriptor."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed, or never connected: nothing to unblock


class Overrun(Exception):
    """:func:`call_within`'s call did not return in its time."""


def call_within(seconds: float, call: Callable[[], T], name: str = "bounded-call") -> T:
    """``call()``'s result (or its exception), or :class:`Overrun` once ``seconds`` pass.

    The call runs on a daemon thread, which is left to finish on its own after an overrun:
    nothing can stop a thread blocked in the resolver, and a daemon thread does not hold
    the process at exit (a ``ThreadPoolExecutor``'s workers would). Whatever it returns
    then is dropped, so the call must clean up after itself (a ``with`` block closes its
    response); an HTTP attempt left so finds its :class:`AttemptDeadline` expired, which
    shuts any socket it opens late at once.
    """
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(call())
        except BaseException as error:  # handed to the caller, which raises it as its own
            errors.append(error)

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(seconds)
    if results:
        return results[0]
    if errors:
        raise errors[0]
    raise Overrun(f"no answer after {seconds:g} s")
