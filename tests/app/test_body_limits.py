"""Request bodies are bounded at the edge, and a client that abandons an upload is not an
error.

Each route that takes a body has a limit (a small multiple of its largest valid request, see
``app.body_limits``); a body past it is answered 413 at once, without reading the rest, and
the connection is closed. The server here is real (uvicorn, as ``make run`` serves) and needs
no models: every body is read before the models are asked for.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from support.live_server import LiveServer

from app.body_limits import NO_BODY_LIMIT, body_limits
from app.main import create_app
from engine.settings import Settings

# A request deadline far beyond the waits below: a server that waited for the rest of a
# body would not answer at all within them.
SETTINGS = Settings(load_models=False, request_timeout_s=60, shutdown_timeout_s=2)
LIMITS = body_limits(SETTINGS)
BODY_ROUTES = ["/api/runs", "/runs", "/api/probes", "/probes", "/api/calibrate", "/calibrate"]
CHUNK = 16 * 1024


@pytest.fixture(scope="module")
def server():
    with LiveServer(create_app(SETTINGS)) as server:
        yield server


class Errors(logging.Handler):
    """The ERROR records of the server's loggers (uvicorn's do not reach the root logger)."""

    LOGGERS = ("", "uvicorn.error", "specscope")

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> Errors:
        for name in self.LOGGERS:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeHandler(self)

    def messages(self) -> list[str]:
        return [self.format(r) for r in self.records]


def head(path: str, port: int, method: str = "POST", **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer(s: socket.socket, seconds: float) -> bytes:
    """Everything the server sends within ``seconds``, until it closes the connection."""
    s.settimeout(seconds)
    data = b""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and (chunk := s.recv(65536)):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data


@pytest.mark.parametrize("path", BODY_ROUTES)
def test_a_streamed_body_past_the_limit_is_refused_before_the_rest_comes(server, path):
    """Chunks without a Content-Length, past the limit, and then nothing: a server that read
    the whole body first would still be waiting."""
    limit = LIMITS[path]
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(head(path, server.port, Transfer_Encoding="chunked"))
        sent = 0
        try:
            while sent <= limit:
                s.sendall(b"%x\r\n" % CHUNK + b"a" * CHUNK + b"\r\n")
                sent += CHUNK
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused part way through what was sent: the answer is still there to read
        start = time.monotonic()
        reply = answer(s, 5.0)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert time.monotonic() - start < 5.0  # answered, and the connection closed
    message = json.loads(reply.split(b"\r\n\r\n", 1)[1])["message"]
    assert f"{limit // 1024} KB" in message


@pytest.mark.parametrize(("method", "path"), [*(("POST", p) for p in BODY_ROUTES),
                                              ("GET", "/api/theory"), ("POST", "/nowhere")])
def test_a_declared_length_past_the_limit_is_refused_at_once(server, method, path):
    """Before any of the body comes; a route that takes no body allows a few bytes."""
    limit = LIMITS.get(path, NO_BODY_LIMIT)
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(head(path, server.port, method, Content_Length=str(limit + 1)))
        reply = answer(s, 5.0)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]


@pytest.mark.parametrize(("method", "path"), [("GET", "/api/theory"), ("GET", "/"),
                                              ("POST", "/nowhere")])
def test_a_chunked_body_on_a_route_that_takes_none_is_refused_past_1_kb(server, method, path):
    """No route reads it, so the limit cannot wait for a route to: the edge reads it."""
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(head(path, server.port, method, Transfer_Encoding="chunked"))
        try:
            for _ in range(64):  # 1 MB, and then nothing: the 413 must not wait for the end
                s.sendall(b"%x\r\n" % CHUNK + b"a" * CHUNK + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        reply = answer(s, 5.0)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    message = json.loads(reply.split(b"\r\n\r\n", 1)[1])["message"]
    assert message == f"the request body is over the limit of 1 KB ({NO_BODY_LIMIT} bytes)"


def test_a_small_chunked_body_on_a_route_that_takes_none_is_read_and_ignored(server):
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(head("/api/theory", server.port, "GET", Transfer_Encoding="chunked")
                  + b"5\r\nhello\r\n0\r\n\r\n")
        reply = answer(s, 1.0)
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]


def test_an_http_client_streaming_a_huge_body_gets_413_and_stops_sending(server):
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        while sent < 64 * 1024 * 1024:
            sent += CHUNK
            yield b"a" * CHUNK

    response = httpx.post(server.url + "/api/runs", content=body(), timeout=30)
    assert response.status_code == 413
    assert "over the limit" in response.json()["message"]
    assert sent < 16 * 1024 * 1024  # what the sockets' buffers took, not the 64 MB


def test_bodies_within_the_limits_are_read_as_before(server):
    response = httpx.post(server.url + "/api/calibrate", json={"before": "x 1\n"})
    assert response.status_code == 422 and "hold no vllm:spec_decode_" in response.text
    response = httpx.post(server.url + "/api/runs", json={"prompt": "the fox"})
    assert response.status_code == 503  # accepted; no models on this server


@pytest.mark.parametrize("path", ["/api/probes", "/probes", "/api/calibrate", "/calibrate"])
def test_an_abandoned_upload_is_no_error(server, path):
    """A client that sends part of a body and goes away: nothing to answer, nothing to log
    as an error (any client could fill the log)."""
    with Errors() as errors:
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(head(path, server.port, Content_Length="100000") + b"the quick")
            time.sleep(0.2)
        time.sleep(0.5)  # the server sees the disconnect
        assert httpx.get(server.url + "/healthz").status_code == 200
    assert errors.messages() == []


def test_an_upload_cut_by_the_shutdown_is_no_error():
    settings = Settings(load_models=False, request_timeout_s=60, shutdown_timeout_s=1)
    live = LiveServer(create_app(settings))
    with Errors() as errors:
        with live:
            s = socket.create_connection(("127.0.0.1", live.port))
            s.sendall(head("/api/probes", live.port, Content_Length="100000") + b"the")
            time.sleep(0.2)
        with s:
            reply = answer(s, 1.0)
    assert errors.messages() == []
    assert b" 500 " not in reply.split(b"\r\n", 1)[0]
