"""The Jinja2 environment shared by every page, with the number formats the page uses."""

from __future__ import annotations

import datetime

from fastapi.templating import Jinja2Templates

from app.charts import cycle_tree
from engine.analytic.presets import devices
from engine.settings import REPO_ROOT

templates = Jinja2Templates(directory=REPO_ROOT / "templates")


NO_DATA = "—"  # how the page shows an estimate with nothing to estimate from (None)


def _fixed(value: float | None, digits: int = 2) -> str:
    return NO_DATA if value is None else f"{value:.{digits}f}"


def _durations(seconds: tuple[float, ...], arrow: str = " → ") -> str:
    """Times side by side in one unit, the one that suits the largest: "11.0 s → 6.8 s",
    "320 ms → 224 ms", "3.20 s → 2.24 s", "12.5 min → 7.8 min"."""
    largest = max(seconds)
    if largest < 0.1:
        return arrow.join(f"{s * 1000:.1f} ms" for s in seconds)
    if largest < 1:
        return arrow.join(f"{s * 1000:.0f} ms" for s in seconds)
    if largest < 10:
        return arrow.join(f"{s:.2f} s" for s in seconds)
    if largest < 600:
        return arrow.join(f"{s:.1f} s" for s in seconds)
    return arrow.join(f"{s / 60:.1f} min" for s in seconds)


def _ms(value: float) -> str:
    """A duration in milliseconds with three significant figures ("4.83 ms", "0.0412 ms")."""
    return f"{value:.3g} ms" if value < 1000 else f"{value / 1000:.3g} s"


def _token_label(text: str) -> str:
    """Whitespace made visible, so a space or a newline token is still a chip you can see."""
    if text == "":
        return "⋯"  # a token ending inside a UTF-8 character; the next one carries it
    return text.replace(" ", "·").replace("\n", "↵").replace("\t", "⇥")


def _clock(unix_s: float) -> str:
    """A Unix time as UTC hours, minutes and seconds."""
    return datetime.datetime.fromtimestamp(unix_s, datetime.UTC).strftime("%H:%M:%S")


def _pvalue(p: float) -> str:
    """A p-value as a person reads it: "< 0.0001" below that, else four decimals at most."""
    return "< 0.0001" if p < 1e-4 else f"{p:.4f}".rstrip("0").rstrip(".")


def _counted(n: int, noun: str) -> str:
    """"1 token", "2 tokens": a count with its noun, singular for one."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


templates.env.filters["fixed"] = _fixed
templates.env.filters["counted"] = _counted
templates.env.filters["clock"] = _clock
templates.env.filters["pvalue"] = _pvalue
templates.env.filters["token_label"] = _token_label
templates.env.filters["durations"] = _durations
templates.env.filters["ms"] = _ms
templates.env.filters["devices"] = devices
templates.env.filters["cycle_tree"] = cycle_tree
