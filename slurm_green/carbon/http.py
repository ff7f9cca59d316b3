"""One HTTP client for every live carbon API: timeouts, retries, backoff, and 429 honoured.

Retries cover timeouts, connection errors and 5xx answers, with exponential
backoff. A 429 waits for its ``Retry-After`` (seconds or an HTTP date) when
that is within ``max_retry_after``; longer waits fail fast with
:class:`RateLimitedError` so a refresh thread is not parked for an hour. 401
and 403 are not retried. Errors name the provider, the path and the status,
never a header value, so credentials cannot leak through messages (a 4xx body
quoted in an error has the request's credentials masked, in case it echoes them).

httpx's ``timeout`` bounds each read, not the answer: a server sending a byte
every few seconds (of its headers or of its body), or gigabytes at full speed, would hold the
refresh thread (and the chain's fall-through) indefinitely, or fill the controller's memory.
So each attempt runs under an :class:`~slurm_green.carbon.deadline.AttemptDeadline` of
``max_time`` seconds (six timeouts by default), and the body is read in chunks, at most
``max_bytes`` of it (decoded); an answer over either limit fails. Connections are not kept
alive between requests: a provider is asked every few minutes, and the deadline needs to see
each attempt's socket. Before it has one (the host name's lookup, which nothing interrupts,
and the connects), the attempt is bounded by running on a thread of its own that is waited
for no longer (``deadline.call_within``).

The retry loop is tenacity's (stop after so many attempts, exponential wait,
retry only on a transient failure); this module only decides what an answer
means: success, a failure to retry (and the wait the server asked for), or a
failure to report at once. See docs/carbon.md, "Providers", for why tenacity.
"""

from __future__ import annotations

import email.utils
import functools
import json
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from slurm_green.carbon.deadline import AttemptDeadline, Overrun, call_within
from slurm_green.carbon.errors import AuthError, MalformedResponseError, RateLimitedError, SourceError

log = logging.getLogger(__name__)
#: A header value a request can carry: visible ASCII, spaces or tabs only between words (RFC 9110 field-value).
_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?")
#: How long past its deadline an attempt is waited for: the deadline shuts its sockets, and the
#: transport error that follows takes milliseconds to come back.
_UNWIND_S = 0.5


class _Transient(Exception):
    """One failed attempt worth another: the error to raise when none is left, and the wait the server asked for."""

    def __init__(self, error: SourceError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


class HttpClient:
    """A small JSON-over-HTTP client for a provider's base URL (the connection pool opens at the first request)."""

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
        max_time: float | None = None,
        max_bytes: int = 16 * 2**20,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.label = label
        self.retries = retries
        self.max_retry_after = max_retry_after
        self.max_time = 6 * timeout if max_time is None else max_time  # 30 s at the default timeout
        self.max_bytes = max_bytes
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._transport = transport
        self._client: httpx.Client | None = None
        self._backoff = wait_exponential(multiplier=backoff, max=max_backoff)
        self._retrying = Retrying(
            stop=stop_after_attempt(retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type(_Transient),
            sleep=sleep,
            before_sleep=lambda state: log.info("%s; retrying", _failure(state)),
            reraise=True,
        )

    def get_json(
        self,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        auth: httpx.Auth | tuple[str, str] | None = None,
    ) -> Any:
        """GET ``path`` and decode JSON, retrying transient failures."""
        try:
            return self._retrying(self._attempt, path, params, headers, auth)
        except _Transient as last:
            error = last.error
            if isinstance(error, RateLimitedError):
                raise error from None
            raise SourceError(f"{error} after {self.retries + 1} attempts") from None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def _attempt(
        self,
        path: str,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
        auth: httpx.Auth | tuple[str, str] | None,
    ) -> Any:
        """One request: its JSON, a :class:`_Transient` to retry, or the error to report at once.

        The request runs on a thread of its own (``call_within``), waited for ``max_time`` and
        a moment more: its deadline ends it once it has a socket, but a host name whose lookup
        hangs (a resolver dropping queries, a hung NSS module) has none yet."""
        where = f"{self.label} {path}"
        _check_headers(headers, where)
        request = functools.partial(self._request, self._http(), where, path, params, headers, auth)
        try:
            return call_within(self.max_time + _UNWIND_S, request, name=f"carbon-http {self.label}")
        except Overrun:
            raise _Transient(SourceError(f"{where}: timed out (not connected after {self.max_time:g} s: the host "
                                         "name's lookup or the connection hung)")) from None

    def _request(
        self,
        client: httpx.Client,
        where: str,
        path: str,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
        auth: httpx.Auth | tuple[str, str] | None,
    ) -> Any:
        """``_attempt``'s request, under its :class:`AttemptDeadline`."""
        late = SourceError(f"{where}: timed out (answer not complete after {self.max_time:g} s)")
        try:
            with AttemptDeadline(self.max_time) as deadline, client.stream(
                    "GET", path, params=params, headers=headers, auth=auth, extensions={"trace": deadline.trace},
            ) as response:
                status = response.status_code
                if status in (401, 403):
                    raise AuthError(f"{where}: HTTP {status} (credentials refused or endpoint not in plan)")
                body = self._read(response, where)
        except httpx.TimeoutException:
            raise _Transient(late if deadline.expired else SourceError(f"{where}: timed out")) from None
        except httpx.DecodingError:  # not a TransportError: it escaped as an "unexpected" error
            raise MalformedResponseError(f"{where}: answer is not in its stated Content-Encoding") from None
        except httpx.TransportError as exc:
            if deadline.expired:  # the deadline shut the socket: what the server did was take too long
                raise _Transient(late) from None
            raise _Transient(SourceError(f"{where}: connection failed ({type(exc).__name__})")) from None
        if deadline.expired:  # a body without a length ends at the shut socket, cut short but no error
            raise _Transient(late)
        if status == 429:
            wait = _retry_after_seconds(response.headers.get("Retry-After"))
            error = RateLimitedError(f"{where}: HTTP 429 rate limited (Retry-After {wait})")
            if wait is not None and wait > self.max_retry_after:
                raise error
            raise _Transient(error, wait)
        if status >= 500:
            raise _Transient(SourceError(f"{where}: HTTP {status}"))
        if status >= 400:
            text = body.decode(response.encoding or "utf-8", errors="replace")
            # Masked whole, then cut: cut first, a secret straddling the cut would keep its prefix.
            text = _masked(text, headers, auth, response.request.headers.get("Authorization"))[:200]
            raise SourceError(f"{where}: HTTP {status}: {text}")
        try:
            return json.loads(body)
        except ValueError:
            raise MalformedResponseError(f"{where}: answer is not JSON") from None

    def _read(self, response: httpx.Response, where: str) -> bytes:
        """The body, or an error once it passes ``max_bytes`` (the attempt's deadline bounds its time)."""
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                raise MalformedResponseError(f"{where}: answer larger than {self.max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(base_url=self._base_url, timeout=self._timeout, transport=self._transport,
                                        limits=httpx.Limits(max_keepalive_connections=0))
        return self._client

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when it gave one, else exponential backoff."""
        failure = state.outcome.exception() if state.outcome else None
        if isinstance(failure, _Transient) and failure.retry_after is not None:
            return failure.retry_after
        return float(self._backoff(state))


def _check_headers(headers: Mapping[str, str] | None, where: str) -> None:
    """Refuse a header value no request can carry, naming the header, never the value.

    Such a value is a credential gone wrong (a token with the newline of the file it came from,
    a control or non-ASCII character). Sent, it fails inside httpcore, whose DEBUG trace logs the
    exception, and with it the whole value: the token, in the controller's log.
    """
    for name, value in (headers or {}).items():
        if not _HEADER_VALUE.fullmatch(value):
            raise AuthError(f"{where}: the {name} header would hold a newline, control or non-ASCII character, "
                            "which no request can carry: check the credential it is made from")


def _failure(state: RetryCallState) -> str:
    failure = state.outcome.exception() if state.outcome else None
    return str(failure)


def _masked(text: str, headers: Mapping[str, str] | None, auth: object, sent_auth: str | None = None) -> str:
    """``text`` with every header value of the request (and each word of one, as ``Bearer TOKEN``),
    each basic-auth part and the ``Authorization`` header as sent (``sent_auth``: httpx builds
    ``Basic base64(user:password)`` from ``auth``, which a gateway may echo) replaced by ``***``."""
    values = [*(headers or {}).values(), *(auth if isinstance(auth, tuple) else ()), *([sent_auth] if sent_auth else [])]
    for value in sorted({*values, *(word for v in values for word in v.split())}, key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


def _retry_after_seconds(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date), or None."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:  # "nan" parses, and would reach time.sleep (a ValueError out of the retry loop)
        return max(seconds, 0.0) if not math.isnan(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
