"""A real uvicorn server on a free localhost port, in a thread of the test process, served
exactly as ``make run`` serves (app.server)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
from fastapi import FastAPI

from app.server import Server, serving_config
from engine.settings import Settings

MODELS = Path(__file__).resolve().parents[2] / "models"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.port = free_port()
        config = serving_config(app, app.state.settings, host="127.0.0.1", port=self.port,
                                log_level="warning")
        self.server = Server(config, app)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 120  # the lifespan loads models before serving
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def wait_until_idle(server: LiveServer, timeout: float = 10.0) -> float:
    """Wait until the server's engine runs nothing; the seconds it took."""
    start = time.monotonic()
    while httpx.get(server.url + "/api/runs/status").json()["running"]:
        assert time.monotonic() - start < timeout, "the engine was not freed"
        time.sleep(0.02)
    return time.monotonic() - start


def shipped_settings(extra_pairs: dict | None = None, **heads: str) -> Settings:
    """A server of the shipped pair (named "shipped", the default) with the trained heads
    named (``eagle="eagle"``, ``medusa="medusa"``: folders of models/), on the CPU, one run
    waiting at most; ``extra_pairs`` adds pairs beside it."""
    from engine.settings import PairSpec

    shipped = PairSpec(target=str(MODELS / "target"), draft=str(MODELS / "draft"),
                       label="shipped pair",
                       **{kind: str(MODELS / folder) for kind, folder in heads.items()})
    return Settings(pairs={"shipped": shipped, **(extra_pairs or {})}, default_pair="shipped",
                    device="cpu", queue_size=1, max_new_tokens_limit=256, run_timeout_s=60.0)
