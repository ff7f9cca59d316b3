"""One HTTP client for every live carbon API: timeouts, retries, backoff, and 429 honoured.

Retries cover timeouts, connection errors and 5xx answers, with exponential
backoff. A 429 waits for its ``Retry-After`` (seconds or an HTTP date) when
that is within ``max_retry_after``; longer waits fail fast with
:class:`RateLimitedError` so a refresh thread is not parked for an hour. 401
and 403 are not retried. Errors name the provider, the path and the status,
never a header value, so credentials cannot leak through messages.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from slurm_green.carbon.errors import AuthError, MalformedResponseError, RateLimitedError, SourceError

log = logging.getLogger(__name__)


class HttpClient:
    """A small JSON-over-HTTP client for a provider's base URL."""

    def __init__(
        self,
        base_url: str,
        *,
        label: str,
        timeout: float = 5.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_retry_after: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.label = label
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self._sleep = sleep
        self._client = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout, transport=transport)

    def get_json(
        self,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        auth: httpx.Auth | tuple[str, str] | None = None,
    ) -> Any:
        """GET ``path`` and decode JSON, retrying transient failures."""
        where = f"{self.label} {path}"
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self._client.get(path, params=params, headers=headers, auth=auth)
            except httpx.TimeoutException:
                problem = f"{where}: timed out"
            except httpx.TransportError as exc:
                problem = f"{where}: connection failed ({type(exc).__name__})"
            else:
                status = response.status_code
                if status in (401, 403):
                    raise AuthError(f"{where}: HTTP {status} (credentials refused or endpoint not in plan)")
                if status == 429:
                    wait = _retry_after_seconds(response.headers.get("Retry-After"))
                    if last or (wait is not None and wait > self.max_retry_after):
                        raise RateLimitedError(f"{where}: HTTP 429 rate limited (Retry-After {wait})")
                    self._sleep(wait if wait is not None else self._backoff(attempt))
                    continue
                if status >= 500:
                    problem = f"{where}: HTTP {status}"
                elif status >= 400:
                    raise SourceError(f"{where}: HTTP {status}: {response.text[:200]}")
                else:
                    try:
                        return response.json()
                    except ValueError:
                        raise MalformedResponseError(f"{where}: answer is not JSON") from None
            if last:
                raise SourceError(f"{problem} after {self.retries + 1} attempts")
            log.info("%s; retrying", problem)
            self._sleep(self._backoff(attempt))
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._client.close()

    def _backoff(self, attempt: int) -> float:
        return min(self.backoff * 2**attempt, self.max_backoff)


def _retry_after_seconds(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date), or None."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
