"""Every request body is bounded at the edge, before any route reads it.

A route that takes a body has a limit: a small multiple of its largest valid request (the
prompt file's limit itself for a probe, whose body is the file). Every other route takes no
body and allows ``NO_BODY_LIMIT`` bytes. A ``Content-Length`` over the limit is answered 413
before the app runs; a body sent in chunks is answered 413 as soon as the chunks pass the
limit, and the rest is never read (the connection is closed); on a route that takes none,
whose handler never reads it, the edge reads a chunked body itself, up to the limit. Without
this, a route that reads its body first and validates it afterwards holds all of it in
memory: an 800 MB body took the server from 614 MB to 2.5 GB.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import Problem
from app.host_guard import refuse
from engine.serving.metrics import MAX_METRICS_BYTES
from engine.settings import Settings

NO_BODY_LIMIT = 1024  # routes that take no body
JSON_BYTES_PER_CHAR = 12  # the longest a JSON string spends on one character: \ud83d\ude00
# Two /metrics texts at their limit; twice, for the JSON's escapes or the form's encoding.
CALIBRATE_BYTES = 2 * (2 * MAX_METRICS_BYTES + 1024)


@dataclass(frozen=True)
class Limit:
    bytes: int
    what: str  # what the body is, for the message

    def message(self) -> str:
        return f"{self.what} is over the limit of {self.bytes // 1024} KB ({self.bytes} bytes)"


def body_limits(settings: Settings) -> dict[str, int]:
    """The limit in bytes of each route that takes a body, by path (any method)."""
    return {path: limit.bytes for path, limit in _limits(settings).items()}


def _limits(settings: Settings) -> dict[str, Limit]:
    # A run: a prompt at its limit, every character escaped, and the other fields; twice.
    runs = Limit(2 * (JSON_BYTES_PER_CHAR * settings.max_prompt_chars + 1024),
                 "the request body")
    # A probe's body is its prompt file: the file's own limit.
    probes = Limit(settings.probe_max_bytes, "the prompt file")
    calibrate = Limit(CALIBRATE_BYTES, "the pasted text")
    return {"/api/runs": runs, "/runs": runs, "/api/probes": probes, "/probes": probes,
            "/api/calibrate": calibrate, "/calibrate": calibrate}


def too_large(limit: int) -> dict:
    """The 413 answer in an operation's schema, stating the route's limit."""
    return {"model": Problem, "description": (
        f"the body is over this route's limit of {limit} bytes ({limit // 1024} KB): it is "
        "refused as soon as that many have arrived, and the connection is closed")}


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once the body passes its limit; answered as any HTTP error,
    with the connection closed (the rest of the body is never read)."""

    def __init__(self, limit: Limit) -> None:
        super().__init__(413, limit.message(), headers={"Connection": "close"})


class BodyLimit:
    """Pure ASGI middleware: the limits of :func:`body_limits`, enforced on every request."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.limits = _limits(settings)
        self.no_body = Limit(NO_BODY_LIMIT, "the request body")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.get(scope["path"], self.no_body)
        headers = Headers(scope=scope)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit.bytes:
            await refuse(send, 413, limit.message())
            return
        if limit is self.no_body and "transfer-encoding" in headers:
            # No route here reads a body, so nothing would pull the chunks through the check
            # below while the server still reads them all to reuse the connection: read them
            # here, up to the limit.
            first = await self._read_small(receive, limit)
            if first is None:
                await refuse(send, 413, limit.message())
                return
            receive = _replaying(first, receive)
        received = 0

        async def bounded() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit.bytes:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, bounded, send)

    @staticmethod
    async def _read_small(receive: Receive, limit: Limit) -> Message | None:
        """The whole body as one message, or None once it passes ``limit``."""
        body = b""
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return message  # the client went away: the app sees it
            body += message.get("body", b"")
            if len(body) > limit.bytes:
                return None
            if not message.get("more_body", False):
                return {"type": "http.request", "body": body, "more_body": False}


def _replaying(first: Message, receive: Receive) -> Receive:
    """``receive`` that answers ``first`` once before it waits on the client again."""
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
