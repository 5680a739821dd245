"""The Jinja2 environment shared by every page, with the number formats the page uses."""

from __future__ import annotations

from fastapi.templating import Jinja2Templates

from engine.settings import REPO_ROOT

templates = Jinja2Templates(directory=REPO_ROOT / "templates")


def _fixed(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}"


def _duration(seconds: float) -> str:
    """Under 10 s in whole milliseconds ("6823 ms"), then seconds ("11.0 s"), then minutes."""
    if seconds < 10:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 600:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


def _token_label(text: str) -> str:
    """Whitespace made visible, so a space or a newline token is still a chip you can see."""
    if text == "":
        return "⋯"  # a token ending inside a UTF-8 character; the next one carries it
    return text.replace(" ", "·").replace("\n", "↵").replace("\t", "⇥")


templates.env.filters["fixed"] = _fixed
templates.env.filters["token_label"] = _token_label
templates.env.filters["duration"] = _duration
