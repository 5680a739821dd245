"""Charts as standalone SVG files and PNG images, and the link-preview card, drawn by resvg.

The page's own chart partials are reused inside a standalone ``<svg>`` with a small
stylesheet (a file has no page CSS to lean on). PNGs are cached by their SVG source, so the
same state is rendered once.
"""

from __future__ import annotations

import re
import textwrap
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


def png_response(svg: str, zoom: float = 1.0, headers: dict[str, str] | None = None) -> Response:
    return Response(png(svg, zoom=zoom), media_type="image/png",
                    headers={"Cache-Control": "public, max-age=86400", **(headers or {})})


def export(svg: str, fmt: str, name: str) -> Response:
    """A chart download: the SVG file, or its PNG at twice the size."""
    disposition = {"Content-Disposition": f'attachment; filename="{name}.{fmt}"'}
    if fmt == "svg":
        return Response(svg, media_type="image/svg+xml", headers=disposition)
    return png_response(svg, EXPORT_ZOOM, disposition)
