"""Parsing ``/metrics`` text off the event loop, a few at a time.

Parsing a 4 MB page takes seconds of CPU and holds its objects in memory; done inside an
``async`` handler it stalls every other request and every event stream meanwhile. Here the
work runs in a worker thread, at most ``MAX_PARSERS`` at once: a request that finds every
parser busy is answered 503 with a message and a Retry-After at once (it never queues
behind them), and the watch's scheduled scrapes wait their turn instead. Two things keep the
event loop's share of the interpreter while a parse runs: a short switch interval and the
cyclic collector paused (see below).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

from starlette.exceptions import HTTPException

T = TypeVar("T")
MAX_PARSERS = 2  # two cores here: more would only share them
RETRY_AFTER_S = 5


# The parser is pure Python and holds the interpreter lock between checks; the event loop,
# which gives it up at every wait for I/O, waits up to one switch interval to get it back,
# several times per request. At Python's default, 5 ms, that made /api/theory take 30-60 ms
# while a 4 MB page was parsed; at 0.5 ms a parse costs no more and the loop gets back in time.
SWITCH_INTERVAL_S = 0.0005


def share_the_interpreter() -> None:
    """Hand the interpreter lock between threads every :data:`SWITCH_INTERVAL_S`."""
    sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))


class _CollectorPause:
    """The cyclic garbage collector off while any parse runs. A 4 MB page makes millions of
    objects, and each full collection over them held the interpreter lock for 0.4 s, a stall
    of every request; the parser's objects hold no cycles, so reference counting frees them
    all the same."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._disabled_here = False

    def __enter__(self) -> None:
        with self._lock:
            if self._running == 0 and gc.isenabled():
                gc.disable()
                self._disabled_here = True
            self._running += 1

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0 and self._disabled_here:
                self._disabled_here = False
                gc.enable()


_collector_paused = _CollectorPause()


def _parse(fn: Callable[..., T], *args) -> T:
    with _collector_paused:
        return fn(*args)


class ParsersBusy(HTTPException):
    def __init__(self) -> None:
        super().__init__(503, f"The server is already reading {MAX_PARSERS} /metrics texts; "
                              f"please try again in about {RETRY_AFTER_S} s.",
                         headers={"Retry-After": str(RETRY_AFTER_S)})


class Parsers:
    """``await parsers.now(fn, *args)`` (a request: 503 when busy) or ``await
    parsers.queued(fn, *args)`` (the watch: waits for a free parser)."""

    def __init__(self, limit: int = MAX_PARSERS) -> None:
        share_the_interpreter()
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
            return await asyncio.to_thread(_parse, fn, *args)
