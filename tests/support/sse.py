"""Server-Sent Events as the tests read them."""

from __future__ import annotations

import json

import httpx


def read_events(response: httpx.Response) -> list[tuple[str, dict]]:
    """Every ``(event, data)`` of a streamed response, in order."""
    events, kind = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            events.append((kind, json.loads(line[6:])))
    return events
