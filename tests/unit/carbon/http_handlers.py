"""Handlers for the local HTTP test server shared by the carbon client tests."""

from __future__ import annotations

import time

from werkzeug import Request, Response


def hanging(request: Request) -> Response:
    """Answers only after the clients' short test timeouts (0.2 s) have run out."""
    time.sleep(0.6)
    return Response("{}", content_type="application/json")
