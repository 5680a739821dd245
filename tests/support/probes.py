"""Probes over HTTP for the tests: a small, fast probe, and its stream read as events."""

from __future__ import annotations

import httpx

from support.sse import read_events as events

FAST = {"sets": ["python", "jargon"], "temperatures": "0,1", "k": 3, "max_new_tokens": 5,
        "prompts_per_set": 2, "seed": 1}


def result_of(stream: list[tuple[str, dict]]) -> dict:
    """The ``probe`` event's data (a ``saved`` event follows it)."""
    return next(data for kind, data in stream if kind == "probe")


def probe(server, params=None, body: bytes = b"", path="/api/probes"):
    with httpx.stream("POST", server.url + path, params=params or FAST, content=body,
                      timeout=120) as response:
        assert response.status_code == 200, response.read()
        return events(response)
