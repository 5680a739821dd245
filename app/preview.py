"""Charts as standalone SVG files and PNG images, and the link-preview card, drawn by resvg.

The page's own chart partials are reused inside a standalone ``<svg>`` with a small
stylesheet (a file has no page CSS to lean on). PNGs are cached by their SVG source, so the
same state is rendered once. A fresh card costs resvg about 130 ms of CPU, so cards are drawn
ahead when one will likely be asked for (:func:`draw_soon`: a page opened from a pasted link,
a run just saved), off the request's thread; a fetch that arrives while its card is being
drawn waits for that drawing instead of starting another.
"""

from __future__ import annotations

import re
import textwrap
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

import resvg_py
from fastapi.responses import Response

from app.charts import BarChart, SpeedupChart
from app.templating import templates

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


@lru_cache(maxsize=256)
def png(svg: str, *, zoom: float) -> bytes:
    """PNG bytes of ``svg``; the same source is rendered once (the cache holds 256). ``zoom``
    is a required keyword so that every call makes the same cache key."""
    fonts: dict[str, Any] = {"skip_system_fonts": True, "font_files": FONT_FILES} \
        if FONT_FILES else {}
    return resvg_py.svg_to_bytes(svg_string=clean_text(svg), zoom=zoom, background="#ffffff",
                                 font_family=FONT_FAMILY, **fonts)


# One drawing thread, and a bound on the cards waiting for it: a burst of page loads costs a
# few cards of CPU in the background, not one per load.
MAX_WAITING_CARDS = 4
_drawer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="specscope-preview")
_drawing: dict[str, Future[bytes]] = {}
_drawing_lock = threading.Lock()


def draw_soon(svg: str) -> Future[bytes] | None:
    """Draw the card ``svg`` in the background so that its first fetch finds it in the cache;
    None when too many cards are already waiting to be drawn."""
    with _drawing_lock:
        if svg in _drawing:
            return _drawing[svg]
        if len(_drawing) >= MAX_WAITING_CARDS:
            return None
        future = _drawing[svg] = _drawer.submit(png, svg, zoom=1.0)
    future.add_done_callback(lambda _: _forget(svg))
    return future


def _forget(svg: str) -> None:
    with _drawing_lock:
        _drawing.pop(svg, None)


def card_png(svg: str, zoom: float = 1.0) -> bytes:
    """The PNG of ``svg``: the background drawing's if it is under way, else :func:`png`."""
    with _drawing_lock:
        future = _drawing.get(svg) if zoom == 1.0 else None
    return future.result() if future is not None else png(svg, zoom=zoom)


def png_response(svg: str, zoom: float = 1.0, headers: dict[str, str] | None = None) -> Response:
    return Response(card_png(svg, zoom), media_type="image/png",
                    headers={"Cache-Control": "public, max-age=86400", **(headers or {})})


def export(svg: str, fmt: str, name: str) -> Response:
    """A chart download: the SVG file, or its PNG at twice the size."""
    disposition = {"Content-Disposition": f'attachment; filename="{name}.{fmt}"'}
    if fmt == "svg":
        return Response(svg, media_type="image/svg+xml", headers=disposition)
    return png_response(svg, EXPORT_ZOOM, disposition)
