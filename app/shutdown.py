"""SIGTERM seen from the app, whichever ASGI server runs it.

ASGI tells an app of shutdown only in the lifespan, and a server sends that after it has
waited for the open responses: a live run's stream would hold the server until it finished.
So the app hooks the signal itself, in front of the server's own handler, which still runs.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

SHUTDOWN_MESSAGE = "the server is shutting down; please start the run again in a moment"
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def on_shutdown_signal(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` at SIGTERM or SIGINT, then the handler there was before (the
    server's). ``callback`` runs inside a signal handler: it must only schedule work (e.g.
    ``loop.call_soon_threadsafe``). Returns the function that takes the hook off again."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None  # only the main thread may set handlers (a test's server thread)
    previous: dict[int, object] = {sig: signal.getsignal(sig) for sig in SIGNALS}

    def handler(signum: int, frame: FrameType | None) -> None:
        callback()
        before = previous[signum]
        if callable(before):
            before(signum, frame)
        elif before == signal.SIG_DFL:  # nobody handled it: what the signal does by default
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for sig in SIGNALS:
        signal.signal(sig, handler)

    def unhook() -> None:
        for sig, before in previous.items():
            if signal.getsignal(sig) is handler:
                signal.signal(sig, before)  # type: ignore[arg-type]

    return unhook


def stop_streams(state) -> None:
    """End the live runs and /watch's event streams (``state``: the app's ``app.state``): the
    server is shutting down, and either would hold its wait for open responses."""
    runs = getattr(state, "runs", None)
    if runs is not None:
        runs.stop_all(SHUTDOWN_MESSAGE)
    watch = getattr(state, "watch", None)
    if watch is not None:
        watch.end_streams()
