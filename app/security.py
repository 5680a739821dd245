"""Security headers: the page runs no inline script or style, so the policy can be strict."""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)
# Swagger UI starts itself with an inline script; only the docs page allows that.
DOCS_POLICY = CONTENT_SECURITY_POLICY.replace(
    "script-src 'self'", "script-src 'self' 'unsafe-inline'"
).replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")


def wants_embed(scope: Scope) -> bool:
    """The embed view of the slider page or of a saved run."""
    path = scope["path"]
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return query.get("embed") == ["1"] and (path == "/" or path.startswith("/runs/"))


class SecurityHeaders:
    """Pure ASGI middleware, so streamed responses pass through untouched.

    Pages may be framed only in their embed view (``?embed=1``) and only by the origins in
    ``frame_ancestors`` (settings); with none listed, nothing may frame them."""

    def __init__(self, app: ASGIApp, frame_ancestors: list[str] | None = None) -> None:
        self.app = app
        self.frame_ancestors = frame_ancestors or []
        self.embed_policy = CONTENT_SECURITY_POLICY.replace(
            "frame-ancestors 'none'", "frame-ancestors " + " ".join(self.frame_ancestors))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = DOCS_POLICY if scope["path"] == "/docs" else CONTENT_SECURITY_POLICY
        framed = bool(self.frame_ancestors) and wants_embed(scope)
        if framed:
            policy = self.embed_policy

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = policy
                headers["X-Content-Type-Options"] = "nosniff"
                # same-origin, not no-referrer: with no-referrer a form's POST carries
                # "Origin: null", and the host guard cannot tell this page from another site.
                headers["Referrer-Policy"] = "same-origin"
                if not framed:
                    headers["X-Frame-Options"] = "DENY"
            await send(message)

        await self.app(scope, receive, send_with_headers)
