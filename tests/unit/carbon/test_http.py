"""The shared HTTP client against a real local server: retries, backoff, 429, timeouts, bad bodies."""

from __future__ import annotations

import email.utils
import socket
import threading
import time

import pytest
from http_handlers import hanging, trickling

from slurm_green.carbon.errors import AuthError, MalformedResponseError, RateLimitedError, SourceError
from slurm_green.carbon.http import HttpClient


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(httpserver, sleeps) -> HttpClient:
    return HttpClient(httpserver.url_for(""), label="test", timeout=0.5, retries=2, backoff=0.1, sleep=sleeps.append)


def test_ok_json(httpserver, client):
    httpserver.expect_request("/x", query_string="a=1").respond_with_json({"ok": True})
    assert client.get_json("/x", params={"a": 1}) == {"ok": True}


def test_429_waits_for_retry_after_then_succeeds(httpserver, client, sleeps):
    httpserver.expect_ordered_request("/x").respond_with_data("slow down", status=429, headers={"Retry-After": "7"})
    httpserver.expect_ordered_request("/x").respond_with_json({"n": 1})
    assert client.get_json("/x") == {"n": 1}
    assert sleeps == [7.0]


def test_429_with_http_date_retry_after(httpserver, client, sleeps):
    when = email.utils.formatdate(time.time() + 5, usegmt=True)
    httpserver.expect_ordered_request("/x").respond_with_data("", status=429, headers={"Retry-After": when})
    httpserver.expect_ordered_request("/x").respond_with_json({})
    client.get_json("/x")
    assert 3.0 <= sleeps[0] <= 6.0


def test_429_with_a_retry_after_of_nan_backs_off_as_without_one(httpserver, client, sleeps):
    """``float("nan")`` parses: the client slept NaN seconds, a ValueError out of the retry loop."""
    httpserver.expect_request("/x").respond_with_data("", status=429, headers={"Retry-After": "nan"})
    with pytest.raises(RateLimitedError, match="Retry-After None"):
        client.get_json("/x")
    assert sleeps == [0.1, 0.2]


def test_429_with_a_long_retry_after_fails_fast(httpserver, client, sleeps):
    httpserver.expect_request("/x").respond_with_data("", status=429, headers={"Retry-After": "3600"})
    with pytest.raises(RateLimitedError, match="429"):
        client.get_json("/x")
    assert sleeps == []


def test_429_forever_gives_up_after_the_retries(httpserver, client, sleeps):
    httpserver.expect_request("/x").respond_with_data("", status=429)
    with pytest.raises(RateLimitedError):
        client.get_json("/x")
    assert sleeps == [0.1, 0.2]  # exponential backoff when no Retry-After


def test_500_is_retried_with_exponential_backoff(httpserver, client, sleeps):
    httpserver.expect_ordered_request("/x").respond_with_data("boom", status=500)
    httpserver.expect_ordered_request("/x").respond_with_data("boom", status=503)
    httpserver.expect_ordered_request("/x").respond_with_json({"finally": 1})
    assert client.get_json("/x") == {"finally": 1}
    assert sleeps == [0.1, 0.2]


def test_500_forever_is_a_source_error(httpserver, client):
    httpserver.expect_request("/x").respond_with_data("boom", status=500)
    with pytest.raises(SourceError, match="HTTP 500 after 3 attempts"):
        client.get_json("/x")
    assert len(httpserver.log) == 3


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failures_are_not_retried(httpserver, client, status):
    httpserver.expect_request("/x").respond_with_data("nope", status=status)
    with pytest.raises(AuthError, match=str(status)):
        client.get_json("/x")
    assert len(httpserver.log) == 1


def test_timeout_is_retried_then_reported(httpserver, sleeps):
    httpserver.expect_request("/slow").respond_with_handler(hanging)
    client = HttpClient(httpserver.url_for(""), label="test", timeout=0.2, retries=1, sleep=sleeps.append)
    with pytest.raises(SourceError, match="timed out after 2 attempts"):
        client.get_json("/slow")
    assert sleeps == [0.5]


def test_an_answer_trickling_in_is_cut_off_after_six_timeouts(httpserver, sleeps):
    """httpx's timeout bounds each read only: without a limit on the whole answer, a server
    sending a byte now and then holds the refresh thread, and the chain's fall-through, for ever."""
    httpserver.expect_request("/slow").respond_with_handler(trickling)
    client = HttpClient(httpserver.url_for(""), label="test", timeout=0.2, retries=0, sleep=sleeps.append)
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"timed out \(answer not complete after 1.2 s\) after 1 attempts"):
        client.get_json("/slow")
    assert time.monotonic() - started < 2.5  # the answer itself takes 3 s


@pytest.fixture
def header_trickler():
    """A raw local HTTP server that sends its status line and headers a byte every 0.05 s for 3 s:
    werkzeug sends headers at once, and this failure is in the headers, which httpx reads itself."""
    server = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            connection.recv(65536)
            try:
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 60:
                    if done.wait(0.05):
                        return
                    connection.sendall(bytes([byte]))
                connection.sendall(b"\r\nContent-Length: 2\r\n\r\n{}")
            except OSError:
                return  # the client shut its end: what the test wants

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    done.set()
    thread.join(5)
    server.close()


def test_headers_trickling_in_are_cut_off_after_six_timeouts(header_trickler, sleeps):
    """Each byte of the headers came within the read timeout, so httpx waited for all of them:
    up to 16 KiB at a byte per 5 s is a day of a blocked refresh thread."""
    client = HttpClient(header_trickler, label="test", timeout=0.2, retries=0, sleep=sleeps.append)
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"timed out \(answer not complete after 1.2 s\) after 1 attempts"):
        client.get_json("/slow")
    assert time.monotonic() - started < 2.5  # the headers alone take 3 s


@pytest.fixture
def hung_lookup(monkeypatch):
    """The host name ``hung.invalid`` resolves as through a resolver that drops queries: the lookup
    blocks (3 s here), then fails. ``getaddrinfo`` is the outer edge: no test can point the
    system's resolver at a server of its own."""
    real = socket.getaddrinfo
    released = threading.Event()

    def getaddrinfo(host, *args, **kwargs):
        if host == "hung.invalid":
            released.wait(3.0)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield "http://hung.invalid"
    released.set()


def test_a_host_name_whose_lookup_hangs_is_given_up_after_the_attempts_time(hung_lookup, sleeps):
    """Before its socket exists the deadline has nothing to shut: a lookup that hangs held the
    attempt (and the chain's fall-through to the next source) for as long as the resolver did."""
    client = HttpClient(hung_lookup, label="test", timeout=0.2, retries=1, sleep=sleeps.append)
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"timed out \(not connected after 1.2 s: the host name's lookup or the "
                                          r"connection hung\) after 2 attempts"):
        client.get_json("/x")
    assert time.monotonic() - started < 2 * 1.7 + 1.0  # two attempts of 1.2 s + 0.5 s, not 2 x 3 s
    assert sleeps == [0.5]


def test_an_answer_over_the_size_limit_is_refused(httpserver, client):
    """A provider answers kilobytes; 16 MiB and more is a broken server or proxy, refused before it
    fills the controller's memory (and not retried: the same answer would come again)."""
    httpserver.expect_request("/x").respond_with_data(b'{"a": "' + b"x" * (16 * 2**20) + b'"}',
                                                      content_type="application/json")
    with pytest.raises(MalformedResponseError, match=f"answer larger than {16 * 2**20} bytes"):
        client.get_json("/x")
    assert len(httpserver.log) == 1


def test_a_body_not_in_its_content_encoding_is_a_typed_error(httpserver, client):
    """httpx's DecodingError is no TransportError: it came out of the client untyped."""
    httpserver.expect_request("/x").respond_with_data(b"not gzip at all", headers={"Content-Encoding": "gzip"},
                                                      content_type="application/json")
    with pytest.raises(MalformedResponseError, match="not in its stated Content-Encoding"):
        client.get_json("/x")


def test_malformed_body_is_a_typed_error(httpserver, client):
    httpserver.expect_request("/x").respond_with_data("<html>oops</html>", status=200)
    with pytest.raises(MalformedResponseError, match="not JSON"):
        client.get_json("/x")


def test_connection_refused_is_a_source_error(sleeps):
    client = HttpClient("http://127.0.0.1:9", label="nowhere", timeout=0.5, retries=1, sleep=sleeps.append)
    with pytest.raises(SourceError, match="connection failed"):
        client.get_json("/x")
