"""Serving under slow or stalled clients, load and shutdown: every wait is bounded.

The shutdown cases run ``python -m app.main`` as a process and send it SIGTERM, as a process
manager would; the queue's behaviour at shutdown runs on an in-process server with a slowed
target, through the same shutdown path SIGTERM takes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from support.live_server import LiveServer, free_port

from app.main import create_app
from engine.settings import Settings

REPO = Path(__file__).resolve().parents[2]
BODY = {"prompt": "the quick brown fox", "k": 2, "temperature": 1.0, "max_new_tokens": 256,
        "pair": "tiny"}


def wait_for(url: str, process: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode()
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("the server did not start")


@contextmanager
def app_main():
    """``python -m app.main`` (no models) with a 1 s request deadline and a 2 s grace; one
    client may take every connection (these cases all come from 127.0.0.1)."""
    port = free_port()
    env = os.environ | {"SPECSCOPE_PORT": str(port), "SPECSCOPE_LOAD_MODELS": "false",
                        "SPECSCOPE_REQUEST_TIMEOUT_S": "1", "SPECSCOPE_SHUTDOWN_TIMEOUT_S": "2",
                        "SPECSCOPE_MAX_CONNECTIONS": "8",
                        "SPECSCOPE_MAX_CONNECTIONS_PER_CLIENT": "64"}
    process = subprocess.Popen([sys.executable, "-m", "app.main"], cwd=REPO, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(f"http://127.0.0.1:{port}/api/runs/status", process)
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        process.stderr.close()


@pytest.fixture(scope="module")
def served():
    with app_main() as served:
        yield served


def stalled_body(port: int) -> socket.socket:
    """Headers announcing 80 bytes of body, then 10 bytes, then nothing."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: 80\r\n\r\n" + b'{"prompt":')
    return s


def stalled_head(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return s


def closed_within(s: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``s`` within ``seconds`` (what it sends first is skipped)."""
    s.settimeout(seconds)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if s.recv(4096) == b"":
                return True
    except (TimeoutError, ConnectionResetError):
        return False
    return False


def test_a_stalled_request_head_or_body_is_disconnected(served):
    _, port = served
    head, body = stalled_head(port), stalled_body(port)
    try:
        assert closed_within(head, 5.0) and closed_within(body, 5.0)
    finally:
        head.close()
        body.close()


def test_sigterm_with_stalled_clients_exits_promptly():
    with app_main() as (process, port):
        sigterm_with_stalled_clients(process, port)


def sigterm_with_stalled_clients(process: subprocess.Popen, port: int) -> None:
    clients = [stalled_body(port), stalled_head(port)]
    start = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    finally:
        for c in clients:
            c.close()
    # uvicorn re-raises the signal once it has shut down cleanly: the exit is "by SIGTERM".
    assert time.monotonic() - start < 15 and process.returncode in (0, -signal.SIGTERM)


def test_past_the_connection_limit_requests_get_503(served):
    _, port = served
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
    try:
        time.sleep(0.2)
        refused = httpx.get(f"http://127.0.0.1:{port}/api/runs/status")
        assert refused.status_code == 503
        assert refused.json() == {"message": "the server has as many connections open as it "
                                             "takes (SPECSCOPE_MAX_CONNECTIONS = 8); try again "
                                             "in a moment"}
    finally:
        for s in idle:
            s.close()
    time.sleep(0.2)
    assert httpx.get(f"http://127.0.0.1:{port}/api/runs/status").status_code == 200


def test_shutdown_ends_queued_and_running_runs_with_an_error(live_settings):
    settings = live_settings.model_copy(update={"queue_size": 2, "shutdown_timeout_s": 5.0})
    server = LiveServer(create_app(settings))
    with server:
        runs = server.app.state.runs
        pair = runs.pairs["tiny"]
        hook = pair.target.register_forward_hook(lambda *_: time.sleep(0.05))
        runs.pairs["tiny"] = dataclasses.replace(pair, stop_token_ids=frozenset())
        streams: dict[int, list[str]] = {0: [], 1: [], 2: []}

        def read(i: int) -> None:
            with httpx.stream("POST", server.url + "/api/runs", json=BODY, timeout=30) as r:
                streams[i].extend(line for line in r.iter_lines() if line.startswith("event:")
                                  or "shutting down" in line)

        readers = [threading.Thread(target=read, args=(i,)) for i in streams]
        try:
            for t in readers:
                t.start()
            deadline = time.monotonic() + 30
            while runs.status()["waiting"] < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert runs.status()["waiting"] == 2 and runs.status()["running"]
            start = time.monotonic()
            server.server.should_exit = True  # what SIGTERM does
            for t in readers:
                t.join(timeout=10)
            server.thread.join(timeout=10)
            took = time.monotonic() - start
        finally:
            hook.remove()
            runs.pairs["tiny"] = pair
    assert not server.thread.is_alive() and took < 5.0
    for lines in streams.values():
        assert lines[-2] == "event: error" and "shutting down" in lines[-1], lines[-3:]
    # The two that were queued (whichever arrived last) never ran a cycle.
    assert sum("event: cycle" in lines for lines in streams.values()) <= 1


# Linux routes all of 127.0.0.0/8 to the loopback: a socket bound to 127.0.0.2 is another
# client address to the server, though every test client runs here.
ATTACKER, GOOD = "127.0.0.2", "127.0.0.3"


def connect_from(address: str, port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10,
                                    source_address=(address, 0))


def answer_then_close(s: socket.socket, seconds: float) -> tuple[bytes, float]:
    """Everything the server sends on ``s`` until it closes it, and when it closed it (s
    from now); ``seconds`` at most."""
    start = time.monotonic()
    s.settimeout(seconds)
    received = b""
    try:
        while chunk := s.recv(4096):
            received += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return received, time.monotonic() - start


def json_body(answer: bytes) -> dict:
    import json

    return json.loads(answer.partition(b"\r\n\r\n")[2])


@pytest.fixture(scope="module")
def guarded():
    """A server as ``make run`` serves it: the default caps (64 connections, 8 a client) and
    deadlines (a 5 s head, a 10 s body)."""
    with LiveServer(create_app(Settings(load_models=False))) as server:
        yield server


def test_one_address_holding_slow_heads_cannot_starve_another_address(guarded):
    # 70 connections from one address, each with a head that never ends: the report's case.
    dribbling = [connect_from(ATTACKER, guarded.port) for _ in range(70)]
    try:
        for s in dribbling:
            with contextlib.suppress(OSError):  # one refused may already be closed
                s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        time.sleep(0.5)
        with httpx.Client(transport=httpx.HTTPTransport(local_address=GOOD)) as good:
            answers = [good.get(guarded.url + "/api/runs/status").status_code
                       for _ in range(20)]
    finally:
        for s in dribbling:
            s.close()
    assert answers == [200] * 20


def test_a_client_past_its_share_of_connections_is_answered_503_at_once(guarded):
    held = [connect_from(ATTACKER, guarded.port) for _ in range(8)]
    try:
        time.sleep(0.2)
        with connect_from(ATTACKER, guarded.port) as ninth:
            answer, took = answer_then_close(ninth, 10.0)
        assert answer.startswith(b"HTTP/1.1 503 ") and took < 5.0
        assert json_body(answer) == {"message": (
            "this client already has 8 connections open, as many as one client may "
            "(SPECSCOPE_MAX_CONNECTIONS_PER_CLIENT); try again when one has closed")}
        good = httpx.Client(transport=httpx.HTTPTransport(local_address=GOOD))
        with good:
            assert good.get(guarded.url + "/api/runs/status").status_code == 200
    finally:
        for s in held:
            s.close()


def test_a_trickling_head_is_answered_408_within_the_head_deadline():
    settings = Settings(load_models=False, head_timeout_s=1.0, request_timeout_s=10.0)
    with LiveServer(create_app(settings)) as server, \
            socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        for _ in range(3):  # a byte now and then is no way around it
            time.sleep(0.3)
            s.sendall(b"a")
        answer, took = answer_then_close(s, 15.0)
    # The head's deadline, not the body's: well before 10 s (CI is slow, so 3x the 1 s).
    assert answer.startswith(b"HTTP/1.1 408 ") and took < 3.0
    assert json_body(answer) == {"message": "the request's head did not arrive within 1 s; "
                                            "the connection is closed (send it whole, then "
                                            "wait for the answer)"}


def test_a_trickling_body_is_answered_408_before_the_close():
    settings = Settings(load_models=False, request_timeout_s=1.0)
    with LiveServer(create_app(settings)) as server, \
            socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"POST /api/calibrate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 80\r\n\r\n{")
        for _ in range(3):
            time.sleep(0.3)
            s.sendall(b" ")
        answer, took = answer_then_close(s, 15.0)
    assert answer.startswith(b"HTTP/1.1 408 ") and took < 3.0
    assert json_body(answer) == {"message": "the request's body did not arrive within 1 s; "
                                            "the connection is closed (send it whole, then "
                                            "wait for the answer)"}
