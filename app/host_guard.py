"""Against DNS rebinding and cross-site requests: answer only to the configured host names,
and refuse POSTs that another site's page sends.

A page on evil.example can point its own name at 127.0.0.1 and then talk to a server on
localhost as if it were same-origin; its requests still carry ``Host: evil.example``, which
is not on the list. A page elsewhere can also POST to localhost directly (a "simple" request
needs no preflight); the browser marks it with its ``Origin``, which is not this server's.
"""

from __future__ import annotations

import json
import re

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class HostGuard:
    """Pure ASGI middleware: 400 for a Host not in ``allowed_hosts`` ("*" allows any), 403
    for a POST (or any unsafe method) whose ``Origin`` is neither this server's own nor in
    ``allowed_origins``. Requests without ``Origin`` (curl, scripts) are not cross-site."""

    def __init__(self, app: ASGIApp, allowed_hosts: list[str], allowed_origins: list[str]):
        self.app = app
        self.any_host = "*" in allowed_hosts
        self.hosts = {h.lower() for h in allowed_hosts}
        self.origins = {o.lower().rstrip("/") for o in allowed_origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "").lower()
        if not self.any_host and _hostname(host) not in self.hosts:
            await refuse(send, 400, f"this server answers to {', '.join(sorted(self.hosts))}; "
                                     f"the request was for {host[:60]!r} (SPECSCOPE_ALLOWED_HOSTS "
                                     "adds names)")
            return
        origin = headers.get("origin")
        if scope["method"] not in SAFE_METHODS and origin is not None:
            origin = origin.lower().rstrip("/")
            own = f"{scope.get('scheme', 'http')}://{host}"
            # A browser that hides the origin ("null": a no-referrer policy, a sandboxed
            # frame) still says whether the page was this site's own: Sec-Fetch-Site, which
            # no page can set.
            same_site = (origin == "null"
                         and headers.get("sec-fetch-site", "").lower() == "same-origin")
            if origin != own and origin not in self.origins and not same_site:
                who = ("a page that hides its origin" if origin == "null"
                       else f"a page from {origin[:60]!r}")
                await refuse(send, 403, f"{who} may not {_action(scope['path'])} here "
                                         "(SPECSCOPE_ALLOWED_ORIGINS adds origins)")
                return
        await self.app(scope, receive, send)


# What a POST to each path does, for the refusal to name.
ACTIONS = {"/runs": "start runs", "/api/runs": "start runs", "/probes": "start probes",
           "/api/probes": "start probes", "/calibrate": "read vLLM counters (calibrate)",
           "/api/calibrate": "read vLLM counters (calibrate)"}


def _action(path: str) -> str:
    return ACTIONS.get(path.rstrip("/"), "send this request")


# RFC 9110's Host: a name (letters, digits, dots, hyphens) or an IPv6 address in brackets,
# then an optional port of digits. Nothing else may follow or precede the name: a lenient
# split would read "127.0.0.1:8777@evil.example" as 127.0.0.1.
HOST = re.compile(r"(?P<name>\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::[0-9]{1,5})?")


def _hostname(host: str) -> str | None:
    """``host[:port]`` without the port (``[::1]:8000`` gives ``[::1]``), or None when the
    header is not of that form."""
    match = HOST.fullmatch(host)
    return match["name"] if match else None


async def refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"message": message}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
