"""Geometry of the /watch charts: figures over time, drawn by the server as SVG.

x is the time of each interval's end; a gap (the server did not answer) or a reset (it
restarted) breaks every line there, and a reset is marked, so neither reads as a measurement.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.charts import Frame, Tick, nice_step

BREAKS = ("gap", "reset", "started", "no-speculation", "not-vllm")


@dataclass(frozen=True)
class Line:
    label: str
    css: str
    path: str  # SVG path data; one "M" per unbroken run
    dots: list[tuple[float, float, str]]  # x, y, tooltip


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


def time_chart(intervals: Sequence[dict], title: str, y_title: str,
               series: Sequence[tuple[str, str, Callable[[dict], float | None]]],
               y_floor: float = 0.0, y_ceiling: float | None = None,
               width: int = 560, height: int = 220) -> TimeChart:
    """``series``: (label, css class, value of an interval or None)."""
    left, right, top, bottom = 56, width - 12, 14, height - 40
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
        lines.append(Line(label, css, " ".join(parts), dots))
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
                     x_ticks, markers, bands, not values)


def _time_ticks(t0: float, t1: float, count: int = 4) -> list[float]:
    return [t0 + (t1 - t0) * i / count for i in range(count + 1)]


def _clock(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%H:%M:%S")
