"""The link-preview cards of a saved run and of a slider state (drawn by app.preview)."""

from __future__ import annotations

from typing import Any

from app.charts import speedup_chart
from app.preview import preview_svg
from app.render import summary_context
from app.saved.replay import summary_event
from app.saved.titles import CHARTS, run_title, short_prompt, slider_headline, slider_title
from engine.analytic.theory import Figures


def run_preview_svg(record: dict[str, Any]) -> str:
    """The run's link-preview card: its prompt, its figures and its per-position chart."""
    positions = summary_context(summary_event(record))["positions"]
    return preview_svg(f"“{short_prompt(record['settings']['prompt'], 60)}”", run_title(record),
                       positions, "_bar_chart.html", **CHARTS["positions"])


def slider_preview_svg(fig: Figures) -> str:
    """A slider state's link-preview card: its title, its headline and its speedup chart."""
    return preview_svg(slider_title(fig), slider_headline(fig), speedup_chart(fig), "_chart.html",
                       fig=fig)
