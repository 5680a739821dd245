"""A queued run's (or probe's) messages as a Server-Sent Events response, for every route
that streams one; and the answer when the queue is full."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.responses import JSONResponse, StreamingResponse

from app.run_messages import MessageKind, RunMessage, sse
from app.run_queue import LiveRun, RunManager

KEEPALIVE_S = 15.0
RETRY_AFTER_S = 30
STREAM_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def event_stream(manager: RunManager, run: LiveRun,
                 render: Callable[[RunMessage], Any]) -> StreamingResponse:
    return StreamingResponse(run_events(manager, run, render), media_type="text/event-stream",
                             headers=STREAM_HEADERS)


def engine_busy(manager: RunManager) -> JSONResponse:
    """429 with Retry-After: the queue is at its bound."""
    return JSONResponse(
        status_code=429, headers={"Retry-After": str(RETRY_AFTER_S)},
        content={"message": f"The engine is busy and {manager.queue_size} runs are already "
                            f"waiting. Please try again in about {RETRY_AFTER_S} s."})


async def run_events(
    manager: RunManager, run: LiveRun, render: Callable[[RunMessage], Any]
) -> AsyncIterator[str]:
    """A queued run's (or probe's) messages as Server-Sent Events, each through ``render``,
    with a keep-alive comment while nothing comes."""
    # When the client goes away the server cancels this generator; `finally` frees the engine.
    try:
        while True:
            try:
                message = await asyncio.wait_for(run.messages.get(), KEEPALIVE_S)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if message.kind is MessageKind.END:
                return
            yield sse(message.kind, render(message))
            message.delivered.set()  # the server has sent it: the worker may go on timing
    finally:
        manager.cancel(run)
