"""Server-Sent Events as a test reads them."""

from __future__ import annotations

import json

import httpx


def events(response: httpx.Response) -> list[tuple[str, dict]]:
    """Every ``(event, data)`` of a streamed response, in order."""
    out, kind = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            out.append((kind, json.loads(line[6:])))
    return out
