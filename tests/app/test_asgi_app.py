"""``app.main:app`` is the ASGI convention's application: importing it opens nothing, and
any ASGI server that serves it (here plain ``uvicorn app.main:app``) keeps the limits that
live in the app: the JSON 503 past the caps, the 408 for a late body, the 413 for a large one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support.live_server import free_port

REPO = Path(__file__).resolve().parents[2]


def test_importing_app_main_loads_no_model_and_opens_no_database(tmp_path):
    db = tmp_path / "runs.db"
    script = ("import sys, app.main; from fastapi import FastAPI; "
              "print(isinstance(app.main.app, FastAPI), hasattr(app.main.app.state, 'runs'), "
              "app.main.app.state.store)")
    env = os.environ | {"SPECSCOPE_DB": str(db), "SPECSCOPE_LOAD_MODELS": "true",
                        "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.split() == ["True", "False", "None"]  # an app, no runs (models), no store
    assert not db.exists()


@pytest.fixture(scope="module")
def plain_uvicorn(tmp_path_factory):
    """``uvicorn app.main:app``, nothing else: two requests a client, four in all, 3 s for a
    body."""
    port = free_port()
    db = tmp_path_factory.mktemp("db") / "runs.db"
    env = os.environ | {"SPECSCOPE_LOAD_MODELS": "false", "SPECSCOPE_REQUEST_TIMEOUT_S": "3",
                        "SPECSCOPE_MAX_CONNECTIONS": "4",
                        "SPECSCOPE_MAX_CONNECTIONS_PER_CLIENT": "2",
                        "SPECSCOPE_DB": str(db)}
    process = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:app", "--port",
                                str(port)], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline, "uvicorn did not start"
            try:
                httpx.get(url + "/api/runs/status", timeout=1.0)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield port, url, db
    finally:
        process.kill()
        process.wait()
        process.stderr.close()


def test_plain_uvicorn_opens_the_database_at_startup(plain_uvicorn):
    _, url, db = plain_uvicorn
    assert db.exists()
    assert httpx.get(url + "/api/runs/0").status_code == 404  # looked up: no such run


def slow_body(port: int, source: str) -> socket.socket:
    """A request in flight: its head, then a body that does not come."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    s.sendall(b"POST /api/calibrate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              b"Content-Type: application/json\r\nContent-Length: 80\r\n\r\n{")
    return s


def answer(s: socket.socket) -> bytes:
    received = b""
    while chunk := s.recv(4096):
        received += chunk
    return received


def test_plain_uvicorn_answers_a_late_body_408_in_json(plain_uvicorn):
    port, _, _ = plain_uvicorn
    with slow_body(port, "127.0.0.1") as s:
        reply = answer(s)
    assert reply.startswith(b"HTTP/1.1 408 ")
    assert json.loads(reply.partition(b"\r\n\r\n")[2]) == {"message": (
        "the request's body did not arrive within 3 s; the connection is closed (send it "
        "whole, then wait for the answer)")}


def test_plain_uvicorn_answers_a_large_body_413(plain_uvicorn):
    _, url, _ = plain_uvicorn
    refused = httpx.post(url + "/api/runs", content=b"x" * 200_000,
                         headers={"Content-Type": "application/json"})
    assert refused.status_code == 413 and "over the limit" in refused.json()["message"]


def test_plain_uvicorn_refuses_past_the_caps_with_json_503(plain_uvicorn):
    port, url, _ = plain_uvicorn
    mine = [slow_body(port, "127.0.0.2") for _ in range(2)]
    others: list[socket.socket] = []
    try:
        time.sleep(0.3)
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2")) as same:
            refused = same.get(url + "/api/runs/status")
        assert refused.status_code == 503
        assert "SPECSCOPE_MAX_CONNECTIONS_PER_CLIENT" in refused.json()["message"]
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.3")) as other:
            assert other.get(url + "/api/runs/status").status_code == 200
            others += [slow_body(port, "127.0.0.4"), slow_body(port, "127.0.0.5")]
            time.sleep(0.3)
            full = other.get(url + "/api/runs/status")
        assert full.status_code == 503 and full.json() == {"message": (
            "the server has as many connections open as it takes "
            "(SPECSCOPE_MAX_CONNECTIONS = 4); try again in a moment")}
    finally:
        for s in mine + others:
            s.close()
