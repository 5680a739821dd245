"""Serving the app with uvicorn, with every wait bounded: what ``python -m app.main`` adds to
what any ASGI server gets from the app itself (app/limits.py, app/shutdown.py).

- A request's head must arrive within ``head_timeout_s`` of the connection's opening (or of
  the request's first byte); a head that trickles is answered 408 and the connection closed.
  uvicorn bounds only the idle time between requests. The body's deadline is the app's
  (408 after ``request_timeout_s``); here a body no handler reads is cut off a little later.
- One client address may hold ``max_connections_per_client`` connections, counted from the
  moment they open (a head still arriving counts): a connection past that is answered 503
  and closed at once, and takes none of the ``max_connections`` the others share.
- At SIGTERM the runs waiting for the engine end at once with an ``error`` event, the one on
  the engine stops at its next cycle with the same event, and open responses get
  ``shutdown_timeout_s`` to finish before they are cancelled.
- Past ``max_connections`` open connections a request is answered 503, with the JSON
  ``{"message"}`` every other error has (uvicorn's own answer is plain text).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.host_guard import refuse
from app.limits import too_slow_message
from app.shutdown import stop_streams
from engine.settings import Settings

BODY_GRACE_S = 1.0  # the app answers a late body 408 first; this cuts off one nobody reads


def raw_answer(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer with the JSON ``{"message"}``, for the protocol to write when
    no request (so no app) is there to answer."""
    body = json.dumps({"message": message}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


class BoundedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with deadlines on reading each request and a cap on each
    client address's connections."""

    # Set per server by serving_config (a subclass each, so each server counts its own).
    read_timeout_s = 10.0
    head_timeout_s = 5.0
    per_client = 8
    clients: Counter[str] = Counter()
    _read_deadline: asyncio.TimerHandle | None = None
    _reading: object = None  # h11.IDLE: the head is arriving; h11.SEND_BODY: the body
    _client: str | None = None  # the address counted in ``clients``

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
        peer = transport.get_extra_info("peername")
        client = peer[0] if isinstance(peer, tuple) else ""
        if self.clients[client] >= self.per_client:
            self.logger.warning("refused a connection from %s past its %d", client,
                                self.per_client)
            transport.write(raw_answer(503, "Service Unavailable", (
                f"this client already has {self.per_client} connections open, as many as one "
                "client may (SPECSCOPE_MAX_CONNECTIONS_PER_CLIENT); try again when one has "
                "closed")))
            transport.close()  # connection_lost takes it out of the server's count
            return
        self._client = client
        self.clients[client] += 1
        self._watch_reading()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        if self._client is not None:
            self.clients[self._client] -= 1
            if not self.clients[self._client]:
                del self.clients[self._client]
            self._client = None
        super().connection_lost(exc)

    def _watch_reading(self) -> None:
        """Arm the head's deadline while a head arrives, the body's once it is in; disarm
        both once the whole request is in (between requests uvicorn's keep-alive timeout
        applies)."""
        state = self.conn.their_state
        reading = state if state in (h11.IDLE, h11.SEND_BODY) else None
        if reading is self._reading or self.transport.is_closing():
            return
        self._stop_deadline()
        self._reading = reading
        if reading is h11.IDLE:
            self._read_deadline = self.loop.call_later(
                min(self.head_timeout_s, self.read_timeout_s), self._head_too_slow)
        elif reading is h11.SEND_BODY:
            self._read_deadline = self.loop.call_later(self.read_timeout_s + BODY_GRACE_S,
                                                       self._too_slow)

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
        self._reading = None
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _head_too_slow(self) -> None:
        """No app has the request yet: the protocol answers 408 itself."""
        self._read_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            seconds = min(self.head_timeout_s, self.read_timeout_s)
            self.logger.warning("answered 408 to a request head not sent in %g s", seconds)
            self.transport.write(raw_answer(408, "Request Timeout",
                                            too_slow_message("head", seconds)))
            self.transport.close()

    def _too_slow(self) -> None:
        self._read_deadline = None
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            self.logger.warning("closing a connection whose body was not read in %g s",
                                self.read_timeout_s + BODY_GRACE_S)
            self.transport.close()  # a running handler sees a disconnect


class Server(uvicorn.Server):
    """uvicorn's server; at shutdown it first ends the live runs (see the module's doc)."""

    def __init__(self, config: uvicorn.Config, app: FastAPI):
        super().__init__(config)
        self.app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        stop_streams(self.app.state)
        await super().shutdown(sockets)


def serving_config(app: FastAPI, settings: Settings, **overrides) -> uvicorn.Config:
    protocol = type("BoundedH11Protocol", (BoundedH11Protocol,),
                    {"read_timeout_s": settings.request_timeout_s,
                     "head_timeout_s": settings.head_timeout_s,
                     "per_client": settings.max_connections_per_client,
                     "clients": Counter()})
    options = dict(host=settings.host, port=settings.port, http=protocol,
                   timeout_graceful_shutdown=settings.shutdown_timeout_s,
                   limit_concurrency=settings.max_connections) | overrides
    return uvicorn.Config(app, **options)


def serve(app: FastAPI, settings: Settings) -> None:
    Server(serving_config(app, settings), app).run()
