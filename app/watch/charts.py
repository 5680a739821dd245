"""Geometry of the /watch charts: figures over time, drawn by the server as SVG.

x is the time of each interval's end; a gap (the server did not answer) or a reset (it
restarted) breaks every line there, and a reset is marked, so neither reads as a measurement.

The page lays the charts out so that one SVG unit is the same number of pixels in each: a
chart that spans both columns is :data:`WIDE` units wide, two columns and the gap between
them, not a half-width drawing stretched; so their text is one size. A chart of several
lines labels each line's latest value at its right end, the labels pushed apart so that two
close lines (the break-even just above the acceptance) never print over each other.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.charts import Frame, Tick, nice_step

BREAKS = ("gap", "reset", "started", "no-speculation", "not-vllm")


NARROW = 560  # one column of /watch's chart grid, in SVG units
WIDE = 2 * NARROW + 12  # both columns and the 12 px gap between them (static/specscope.css)
LABEL_GAP = 15.0  # SVG units between two end labels' baselines: 13 px text and a little air
LABEL_ROOM = 190  # the right margin a chart with end labels keeps for them


@dataclass(frozen=True)
class Line:
    label: str
    css: str
    path: str  # SVG path data; one "M" per unbroken run
    dots: list[tuple[float, float, str]]  # x, y, tooltip
    end_label: tuple[float, str] | None = None  # y and text of the label at the right end


@dataclass(frozen=True)
class Marker:
    x: float
    label: str


@dataclass(frozen=True)
class Band:
    """A stretch with no answer from the server: from the last reading before it to the
    first one after."""

    x: float
    width: float


@dataclass(frozen=True)
class TimeChart(Frame):
    title: str
    y_title: str
    lines: list[Line]
    y_ticks: list[Tick]
    x_ticks: list[tuple[float, str]]
    markers: list[Marker]
    bands: list[Band]
    empty: bool
    labelled: bool = False  # the lines carry end labels (in the right margin)


def time_chart(intervals: Sequence[dict], title: str, y_title: str,
               series: Sequence[tuple[str, str, Callable[[dict], float | None]]],
               y_floor: float = 0.0, y_ceiling: float | None = None,
               width: int = NARROW, height: int = 220) -> TimeChart:
    """``series``: (label, css class, value of an interval or None)."""
    labelled = len(series) > 1
    left, right, top, bottom = 56, width - (LABEL_ROOM if labelled else 12), 14, height - 40
    times = [iv["ended"] for iv in intervals]
    t0, t1 = (min(times), max(times)) if times else (0.0, 1.0)
    if t1 - t0 < 1e-9:
        t0, t1 = t0 - 1, t1 + 1
    values = [v for _, _, get in series for iv in intervals if (v := get(iv)) is not None]
    high = max(max(values, default=y_floor + 1.0), y_floor + 0.1)
    if y_ceiling is None:
        step = nice_step(max(high - y_floor, 1e-9) * 1.1, 4)
        y_max = y_floor + step * math.ceil((high - y_floor) * 1.1 / step)
    else:
        y_max = y_ceiling
        step = nice_step(y_max - y_floor, 4)

    def x_of(t: float) -> float:
        return left + (t - t0) / (t1 - t0) * (right - left)

    def y_of(v: float) -> float:
        v = min(max(v, y_floor), y_max)
        return bottom - (v - y_floor) / (y_max - y_floor) * (bottom - top)

    lines = []
    for label, css, get in series:
        parts: list[str] = []
        dots = []
        run: list[str] = []
        for iv in intervals:
            value = get(iv) if iv.get("state") not in BREAKS else None
            if value is None:
                if iv.get("state") in BREAKS and run:
                    parts.append("M" + " L".join(run))
                    run = []
                continue
            x, y = x_of(iv["ended"]), y_of(value)
            run.append(f"{x:.1f},{y:.1f}")
            dots.append((x, y, f"{label} {value:.3g} at {_clock(iv['ended'])}"))
        if run:
            parts.append("M" + " L".join(run))
        last = next((get(iv) for iv in reversed(intervals)
                     if iv.get("state") not in BREAKS and get(iv) is not None), None)
        end = (y_of(last), f"{label} {last:.3f}") if labelled and last is not None else None
        lines.append(Line(label, css, " ".join(parts), dots, end))
    if labelled:
        lines = _spread_labels(lines, top + 4, bottom)
    ticks = [Tick(y_floor + i * step, y_of(y_floor + i * step), f"{y_floor + i * step:g}")
             for i in range(int(round((y_max - y_floor) / step)) + 1)]
    x_ticks = [(x_of(t), _clock(t)) for t in _time_ticks(t0, t1)]
    markers = [Marker(x_of(iv["ended"]), "restart") for iv in intervals
               if iv.get("state") == "reset"]
    bands = []
    start = None
    for i, iv in enumerate(intervals):
        if iv.get("state") == "gap" and start is None:
            start = intervals[i - 1]["ended"] if i else iv["ended"]
        elif iv.get("state") != "gap" and start is not None:
            bands.append(Band(x_of(start), x_of(iv["ended"]) - x_of(start)))
            start = None
    if start is not None:
        bands.append(Band(x_of(start), x_of(intervals[-1]["ended"]) - x_of(start)))
    return TimeChart(width, height, left, right, top, bottom, title, y_title, lines, ticks,
                     x_ticks, markers, bands, not values, labelled)


def _spread_labels(lines: list[Line], lowest: float, highest: float) -> list[Line]:
    """The end labels at their lines' heights, moved apart to :data:`LABEL_GAP` (downwards,
    then back up from the bottom edge) so that no two overlap."""
    placed = sorted((ln.end_label[0], i) for i, ln in enumerate(lines) if ln.end_label)
    ys = [max(y + 4, lowest) for y, _ in placed]  # + 4: the baseline of text centred on y
    for j in range(1, len(ys)):
        ys[j] = max(ys[j], ys[j - 1] + LABEL_GAP)
    if ys and ys[-1] > highest:
        ys[-1] = highest
        for j in range(len(ys) - 2, -1, -1):
            ys[j] = min(ys[j], ys[j + 1] - LABEL_GAP)
    out = list(lines)
    for y, (_, i) in zip(ys, placed, strict=True):
        out[i] = Line(lines[i].label, lines[i].css, lines[i].path, lines[i].dots,
                      (y, lines[i].end_label[1]))
    return out


def _time_ticks(t0: float, t1: float, count: int = 4) -> list[float]:
    return [t0 + (t1 - t0) * i / count for i in range(count + 1)]


def _clock(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%H:%M:%S")
