"""Parsing ``/metrics`` text off the event loop, a few at a time.

Parsing a 4 MB page takes seconds of CPU and holds its objects in memory; done inside an
``async`` handler it stalls every other request and every event stream meanwhile. Here the
work runs in a worker thread, at most ``MAX_PARSERS`` at once: a request that finds every
parser busy is answered 503 with a message and a Retry-After at once (it never queues
behind them), and the watch's scheduled scrapes wait their turn instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from starlette.exceptions import HTTPException

T = TypeVar("T")
MAX_PARSERS = 2  # two cores here: more would only share them
RETRY_AFTER_S = 5


class ParsersBusy(HTTPException):
    def __init__(self) -> None:
        super().__init__(503, f"The server is already reading {MAX_PARSERS} /metrics texts; "
                              f"please try again in about {RETRY_AFTER_S} s.",
                         headers={"Retry-After": str(RETRY_AFTER_S)})


class Parsers:
    """``await parsers.now(fn, *args)`` (a request: 503 when busy) or ``await
    parsers.queued(fn, *args)`` (the watch: waits for a free parser)."""

    def __init__(self, limit: int = MAX_PARSERS) -> None:
        self.limit = limit
        self._loop: asyncio.AbstractEventLoop | None = None
        self._free = asyncio.Semaphore(limit)

    def _semaphore(self) -> asyncio.Semaphore:
        # One per event loop: a test client runs each app in a loop of its own.
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._free = loop, asyncio.Semaphore(self.limit)
        return self._free

    async def now(self, fn: Callable[..., T], *args) -> T:
        if self._semaphore().locked():
            raise ParsersBusy()
        return await self.queued(fn, *args)

    async def queued(self, fn: Callable[..., T], *args) -> T:
        async with self._semaphore():
            return await asyncio.to_thread(fn, *args)
