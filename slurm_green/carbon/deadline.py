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
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType
from typing import Any

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
