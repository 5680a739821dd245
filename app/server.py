"""Serving the app with uvicorn, with every wait bounded.

- A request's head and body must arrive within ``request_timeout_s`` of the connection's
  first byte (or of its opening); a client that stops half way is disconnected. uvicorn
  bounds only the idle time between requests.
- At SIGTERM the runs waiting for the engine end at once with an ``error`` event, the one on
  the engine stops at its next cycle with the same event, and open responses get
  ``shutdown_timeout_s`` to finish before they are cancelled.
- Past ``max_connections`` open connections a request is answered 503, with the JSON
  ``{"message"}`` every other error has (uvicorn's own answer is plain text).
"""

from __future__ import annotations

import asyncio
import socket

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.host_guard import refuse
from engine.settings import Settings

SHUTDOWN_MESSAGE = "the server is shutting down; please start the run again in a moment"


class BoundedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with a deadline on reading each request."""

    read_timeout_s = 10.0  # set per server by serving_config
    _read_deadline: asyncio.TimerHandle | None = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The connection limit, checked here as uvicorn checks it, so the refusal can be
        # the documented JSON: uvicorn's own check is off.
        self.max_connections, self.limit_concurrency = self.limit_concurrency, None
        self.app, self._app = self._within_limit, self.app

    async def _within_limit(self, scope, receive, send) -> None:
        # This request's task is already counted, unlike where uvicorn counts.
        if self.max_connections is not None and scope["type"] == "http" and (
                len(self.connections) >= self.max_connections
                or len(self.tasks) > self.max_connections):
            self.logger.warning("refused a request past the limit of %d connections",
                                self.max_connections)
            await refuse(send, 503, "the server has as many connections open as it takes "
                                    f"(SPECSCOPE_MAX_CONNECTIONS = {self.max_connections}); "
                                    "try again in a moment")
            return
        await self._app(scope, receive, send)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch_reading()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def _watch_reading(self) -> None:
        """Arm the deadline while a request is still arriving (its head or its body);
        disarm it once the whole request is in (between requests uvicorn's keep-alive
        timeout applies)."""
        reading = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
        if reading and self._read_deadline is None and not self.transport.is_closing():
            self._read_deadline = self.loop.call_later(self.read_timeout_s, self._too_slow)
        elif not reading:
            self._stop_deadline()

    def shutdown(self) -> None:
        """At shutdown, a client still sending its request is disconnected now: its handler
        sees the disconnect, instead of waiting for the body until the grace period ends
        and being cancelled (a logged error and a 500)."""
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and self.cycle is not None \
                and not self.cycle.response_started and not self.transport.is_closing():
            self.transport.close()
            return
        super().shutdown()

    def _stop_deadline(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _too_slow(self) -> None:
        self._read_deadline = None
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self.logger.warning("closing a connection that did not send its request in %g s",
                                self.read_timeout_s)
            self.transport.close()  # a running handler sees a disconnect


class Server(uvicorn.Server):
    """uvicorn's server; at shutdown it first ends the live runs (see the module's doc)."""

    def __init__(self, config: uvicorn.Config, app: FastAPI):
        super().__init__(config)
        self.app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        runs = getattr(self.app.state, "runs", None)
        if runs is not None:
            runs.stop_all(SHUTDOWN_MESSAGE)
        watch = getattr(self.app.state, "watch", None)
        if watch is not None:
            watch.end_streams()  # /watch's event streams would otherwise never end
        await super().shutdown(sockets)


def serving_config(app: FastAPI, settings: Settings, **overrides) -> uvicorn.Config:
    protocol = type("BoundedH11Protocol", (BoundedH11Protocol,),
                    {"read_timeout_s": settings.request_timeout_s})
    options = dict(host=settings.host, port=settings.port, http=protocol,
                   timeout_graceful_shutdown=settings.shutdown_timeout_s,
                   limit_concurrency=settings.max_connections) | overrides
    return uvicorn.Config(app, **options)


def serve(app: FastAPI, settings: Settings) -> None:
    Server(serving_config(app, settings), app).run()
