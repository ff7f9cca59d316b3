"""Handlers for the local HTTP test server shared by the carbon client tests."""

from __future__ import annotations

import time

from werkzeug import Request, Response


def hanging(request: Request) -> Response:
    """Answers only after the clients' short test timeouts (0.2 s) have run out."""
    time.sleep(0.6)
    return Response("{}", content_type="application/json")


def trickling(request: Request) -> Response:
    """A complete JSON answer sent a byte every 0.05 s for 3 s: no single read waits long,
    so only a limit on the whole answer stops it."""

    def body():
        yield b'{"a": '
        for _ in range(60):
            time.sleep(0.05)
            yield b" "
        yield b"1}"

    return Response(body(), content_type="application/json")
