"""Limits every ASGI server gets, since they live in the app (pure ASGI middleware), not in
the server that runs it (``uvicorn app.main:app``, ``python -m app.main``, gunicorn's uvicorn
workers):

- Past ``max_connections`` requests in flight, or ``max_connections_per_client`` from one
  client address, a request is answered 503 with the JSON ``{"message"}`` every other error
  has. One client cannot take every slot: its share is refused, not everyone's.
- A request's body must arrive within ``request_timeout_s`` of its head; a body that trickles
  is answered 408 (JSON, ``Connection: close``) and the connection is closed.

What only a server can see (connections still sending their head, idle keep-alive
connections) is bounded by app/server.py when ``python -m app.main`` serves.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.host_guard import refuse
from engine.settings import Settings

log = logging.getLogger("specscope")


def too_slow_message(what: str, seconds: float) -> str:
    return (f"the request's {what} did not arrive within {seconds:g} s; the connection is "
            "closed (send it whole, then wait for the answer)")


class RequestTimeout(HTTPException):
    """Raised from ``receive`` when the body is late: a route answers it as any HTTP error."""

    def __init__(self, seconds: float) -> None:
        super().__init__(408, too_slow_message("body", seconds), headers={"Connection": "close"})


class RequestLimits:
    """Pure ASGI middleware: the concurrency caps and the body deadline (see the module)."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.limit = settings.max_connections
        self.per_client = settings.max_connections_per_client
        self.body_timeout_s = settings.request_timeout_s
        self.total = 0
        self.by_client: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope["client"][0] if scope.get("client") else ""
        if self.total >= self.limit:
            log.warning("refused a request past the limit of %d connections", self.limit)
            await refuse(send, 503, "the server has as many connections open as it takes "
                                    f"(SPECSCOPE_MAX_CONNECTIONS = {self.limit}); try again "
                                    "in a moment")
            return
        if self.by_client[client] >= self.per_client:
            log.warning("refused a request from %s past its %d connections", client,
                        self.per_client)
            await refuse(send, 503, f"this client already has {self.per_client} requests "
                                    "open, as many as one client may "
                                    "(SPECSCOPE_MAX_CONNECTIONS_PER_CLIENT); try again when "
                                    "one has finished")
            return
        self.total += 1
        self.by_client[client] += 1
        try:
            await self._with_deadline(scope, receive, send)
        finally:
            self.total -= 1
            self.by_client[client] -= 1
            if not self.by_client[client]:
                del self.by_client[client]

    async def _with_deadline(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout_s
        body_in = answered = False

        async def timed_receive() -> Message:
            nonlocal body_in
            # Once the body is in, or the answer has begun, a receive waits for a disconnect
            # (a streamed response listens for one): no deadline applies.
            if body_in or answered:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0))
            except TimeoutError:
                raise RequestTimeout(self.body_timeout_s) from None
            body_in = message["type"] != "http.request" or not message.get("more_body")
            return message

        async def watched_send(message: Message) -> None:
            nonlocal answered
            answered = answered or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except RequestTimeout as error:
            # Raised outside the routes' error handlers (a middleware was reading the body).
            log.warning("answered 408 to a request whose body was late")
            if answered:
                raise
            await refuse(send, 408, str(error.detail))
