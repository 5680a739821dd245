"""Serving under slow or stalled clients, load and shutdown: every wait is bounded.

The shutdown cases run ``python -m app.main`` as a process and send it SIGTERM, as a process
manager would; the queue's behaviour at shutdown runs on an in-process server with a slowed
target, through the same shutdown path SIGTERM takes.
"""

from __future__ import annotations

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
    """``python -m app.main`` (no models) with a 1 s request deadline and a 2 s grace."""
    port = free_port()
    env = os.environ | {"SPECSCOPE_PORT": str(port), "SPECSCOPE_LOAD_MODELS": "false",
                        "SPECSCOPE_REQUEST_TIMEOUT_S": "1", "SPECSCOPE_SHUTDOWN_TIMEOUT_S": "2",
                        "SPECSCOPE_MAX_CONNECTIONS": "8"}
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
