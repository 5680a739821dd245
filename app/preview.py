"""Charts as standalone SVG files and PNG images, and the link-preview card, drawn by resvg.

The page's own chart partials are reused inside a standalone ``<svg>`` with a small
stylesheet (a file has no page CSS to lean on). PNGs are drawn in worker processes
(:class:`Renderer`, bounded: 503 past its queue) and cached by what they show, so the same
card is drawn once. A fresh card costs resvg about 130 ms of CPU, so cards are drawn ahead
when one will likely be asked for (:meth:`Renderer.draw_soon`: a page opened from a pasted
link, a run just saved); a fetch that arrives while its card is being drawn waits for that
drawing instead of starting another.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import signal
import textwrap
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TypeVar

import resvg_py
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from app.charts import BarChart, SpeedupChart
from app.templating import templates

T = TypeVar("T")
log = logging.getLogger("specscope")

PREVIEW_WIDTH, PREVIEW_HEIGHT = 1200, 630  # the size Open Graph and Twitter cards expect
EXPORT_ZOOM = 2  # PNG downloads at twice the chart's own size
# Fonts the card is designed for, regular and bold (Liberation Sans has Arial's metrics); without
# either family resvg falls back to the system's fonts. resvg-py loads the given files on each
# render of an SVG with text, which costs under 1 ms of a fresh card's ~130 ms
# (benchmarks/preview_png.py breaks the time down): the drawing and the PNG encoding dominate.
FONT_FAMILIES = {
    "Liberation Sans": ("/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
                        "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf"),
    "DejaVu Sans": ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                    "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"),
}
FONT_FAMILY, FONT_FILES = next(
    ((family, list(files)) for family, files in FONT_FAMILIES.items()
     if all(Path(f).exists() for f in files)), ("sans-serif", []))

# Jinja escapes only .html/.xml templates by default; these SVGs carry user text too.
svg_templates = templates.env.overlay(autoescape=True)
# Characters XML 1.0 forbids even when escaped: a title holding them must still render.
XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def clean_text(text: str) -> str:
    return XML_ILLEGAL.sub("", text)


def wrap_lines(text: str, width: int, lines: int) -> list[str]:
    """``text`` in at most ``lines`` lines of ``width`` characters, the last one cut with an
    ellipsis when it does not fit; long words are broken."""
    wrapped = textwrap.wrap(" ".join(clean_text(text).split()), width) or [""]
    if len(wrapped) > lines:
        wrapped = wrapped[:lines]
        wrapped[-1] = wrapped[-1][: width - 1].rstrip() + "…"
    return wrapped


def chart_svg(chart: SpeedupChart | BarChart, partial: str, **context: Any) -> str:
    """A chart partial of the page as a standalone SVG file."""
    return svg_templates.get_template("chart.svg").render(chart=chart, partial=partial,
                                                          font=FONT_FAMILY, **context)


def preview_svg(heading: str, headline: str, chart: SpeedupChart | BarChart, partial: str,
                **context: Any) -> str:
    """The link-preview card: a heading, the page's headline and its chart (``context`` is
    what the chart partial needs)."""
    return svg_templates.get_template("preview.svg").render(
        width=PREVIEW_WIDTH, height=PREVIEW_HEIGHT, heading_lines=wrap_lines(heading, 40, 2),
        headline_lines=wrap_lines(headline, 72, 2), chart=chart, partial=partial,
        font=FONT_FAMILY, **context)


def png(svg: str, *, zoom: float) -> bytes:
    """PNG bytes of ``svg``, drawn here and now (the server draws in :class:`Renderer`'s
    worker processes)."""
    fonts: dict[str, Any] = {"skip_system_fonts": True, "font_files": FONT_FILES} \
        if FONT_FILES else {}
    return resvg_py.svg_to_bytes(svg_string=clean_text(svg), zoom=zoom, background="#ffffff",
                                 font_family=FONT_FAMILY, **fonts)


_TOOLTIP = re.compile(r"<title\b[^>]*>.*?</title>", re.S)
_TAG = re.compile(r"<[^>]+>")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def shown(svg: str, zoom: float) -> str:
    """What the PNG of ``svg`` at ``zoom`` shows, as the key of its cache: the SVG without its
    tooltips (a PNG draws no ``<title>``; they carry 3 decimals the card never shows), every
    number inside a tag (a coordinate or a size) to the half pixel. Text is kept as it is, so
    two links share a PNG only when every figure on it reads the same and no line or point
    moves by a pixel or more; each link's figures come from its own parameters, as its page's
    do, so a shared card never shows a figure its page does not."""

    def snap(number: re.Match[str]) -> str:
        return f"{round(float(number.group()) * 2 * zoom) / (2 * zoom):g}"

    return _TAG.sub(lambda tag: _NUMBER.sub(snap, tag.group()), _TOOLTIP.sub("", svg))


RETRY_AFTER_S = 1  # a card takes about 0.1 s to draw, so a few waiting ones are gone by then
CACHED_PNGS = 256  # about 50 KB a card


class RenderersBusy(HTTPException):
    """503 with Retry-After: the worker processes are busy and the queue is at its bound."""

    def __init__(self, why: str) -> None:
        super().__init__(503, f"{why}; please try again in about {RETRY_AFTER_S} s.",
                         headers={"Retry-After": str(RETRY_AFTER_S)})


def _worker_started(parent: int) -> None:
    """A render worker's start: Ctrl-C and the parent's signal handlers are the server's
    business (it shuts the pool down), and a worker whose server died without doing so
    (SIGKILL) exits instead of staying behind as an orphan."""
    signal.set_wakeup_fd(-1)  # forked: else a signal here would wake the server's event loop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="specscope-parent-watch").start()


class Renderer:
    """PNGs drawn by resvg in ``workers`` processes of their own: resvg holds the interpreter
    lock for a whole drawing (about 100 ms), which in the server's process stalled every
    request and event stream. At most ``queue`` drawings wait for a worker; past that a
    request is refused with :class:`RenderersBusy` (503) at once, and a card drawn ahead
    (:meth:`draw_soon`) is skipped. PNGs are cached by what they show (:func:`shown`); a
    request for a PNG that is being drawn waits for that drawing instead of starting another.

    The pool starts with the server (:meth:`start`, in the lifespan) and stops with it
    (:meth:`close`)."""

    def __init__(self, workers: int, queue: int, cached: int = CACHED_PNGS) -> None:
        self.workers, self.bound, self.cached = workers, workers + queue, cached
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.RLock()  # a done callback may run inside submit's caller
        self._cache: OrderedDict[tuple[str, float], bytes] = OrderedDict()
        self._drawing: dict[tuple[str, float], Future[bytes]] = {}
        self._jobs = 0  # submitted and not done: drawings, and whatever submit() was given
        self.hits = self.drawn = 0  # PNGs served from the cache; drawings started

    def start(self) -> None:
        """Start the worker processes, and wait until one has drawn a card (fonts loaded)."""
        with self._lock:
            self._pool = self._new_pool()
        # Forked now, at startup: before the models load and before the server's threads.
        self.submit(png, _WARM_UP, zoom=1.0).result()

    def _new_pool(self) -> ProcessPoolExecutor:
        # fork: a spawned worker would import the server's main module (torch, 10 s, 400 MB).
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_worker_started, initargs=(os.getpid(),))

    def close(self) -> None:
        """Stop the workers (drawings waiting are cancelled; one under way is finished)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    @property
    def drawing(self) -> int:
        """Drawings under way or waiting."""
        with self._lock:
            return len(self._drawing)

    def worker_pids(self) -> list[int]:
        pool = self._pool
        return [] if pool is None else list(pool._processes)  # noqa: SLF001 - no public API

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn`` in a worker process, counted against the bound; RenderersBusy past it."""
        with self._lock:
            if self._pool is None:
                raise RenderersBusy("the server is not drawing images (it is starting or "
                                    "stopping)")
            if self._jobs >= self.bound:
                raise RenderersBusy(f"the server is drawing as many images as it takes "
                                    f"({self.workers} at once, {self.bound - self.workers} "
                                    f"waiting)")
            try:
                future = self._pool.submit(fn, *args, **kwargs)
            except BrokenProcessPool:  # a worker died (killed, out of memory): start afresh
                log.error("a PNG worker process died; starting new ones")
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
                future = self._pool.submit(fn, *args, **kwargs)
            self._jobs += 1
        future.add_done_callback(self._job_done)
        return future

    def _job_done(self, _: Future[Any]) -> None:
        with self._lock:
            self._jobs -= 1

    def _draw(self, svg: str, zoom: float) -> bytes | Future[bytes]:
        """The cached PNG, or the drawing that will make it."""
        key = (shown(svg, zoom), zoom)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self.hits += 1
                return self._cache[key]
            if key not in self._drawing:
                future = self.submit(png, svg, zoom=zoom)
                self.drawn += 1
                self._drawing[key] = future
                future.add_done_callback(lambda done: self._keep(key, done))
            return self._drawing[key]

    def _keep(self, key: tuple[str, float], future: Future[bytes]) -> None:
        with self._lock:
            self._drawing.pop(key, None)
            if future.cancelled() or future.exception() is not None:
                return
            self._cache[key] = future.result()
            while len(self._cache) > self.cached:
                self._cache.popitem(last=False)

    def png(self, svg: str, zoom: float = 1.0) -> bytes:
        """The PNG of ``svg``: cached, or drawn now (RenderersBusy when the pool is full)."""
        drawn = self._draw(svg, zoom)
        if isinstance(drawn, bytes):
            return drawn
        try:
            return drawn.result()
        except (CancelledError, BrokenProcessPool) as error:  # stopping, or a worker died
            raise RenderersBusy("the image could not be drawn (the server is stopping or a "
                                "drawing process stopped)") from error

    def draw_soon(self, svg: str) -> Future[bytes] | None:
        """Draw the card ``svg`` ahead, so that its first fetch finds it in the cache; None
        when the pool is full (a burst of page loads costs no more than the bound)."""
        try:
            drawn = self._draw(svg, 1.0)
        except RenderersBusy:
            return None
        if isinstance(drawn, bytes):
            done: Future[bytes] = Future()
            done.set_result(drawn)
            return done
        return drawn


# A card with text, so that the warm-up loads the fonts too.
_WARM_UP = ('<svg xmlns="http://www.w3.org/2000/svg" width="60" height="30">'
            '<text y="20">x</text></svg>')


def png_response(renderer: Renderer, svg: str, zoom: float = 1.0,
                 headers: dict[str, str] | None = None) -> Response:
    return Response(renderer.png(svg, zoom), media_type="image/png",
                    headers={"Cache-Control": "public, max-age=86400", **(headers or {})})


def export(renderer: Renderer, svg: str, fmt: str, name: str) -> Response:
    """A chart download: the SVG file, or its PNG at twice the size."""
    disposition = {"Content-Disposition": f'attachment; filename="{name}.{fmt}"'}
    if fmt == "svg":
        return Response(svg, media_type="image/svg+xml", headers=disposition)
    return png_response(renderer, svg, EXPORT_ZOOM, disposition)
