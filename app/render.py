"""Engine events as the page shows them: HTML fragments rendered by the page's templates."""

from __future__ import annotations

from typing import Any

from app.charts import measured_vs_model
from app.runs import RunMessage
from app.templating import templates
from engine.analytic import theory
from engine.decoder.events import SummaryEvent


def _render(name: str, **context: Any) -> str:
    return templates.get_template(name).render(**context)


def summary_charts(summary: SummaryEvent) -> dict[str, Any]:
    """Per-position acceptance against alpha^i, and acceptance lengths against the
    truncated geometric model, both at the counted alpha."""
    k, alpha = summary.k, summary.alpha_counted
    shares = [n / summary.cycles for n in summary.acceptance_length_histogram]
    return {
        "positions": measured_vs_model(
            [str(i) for i in range(1, k + 1)], summary.per_position_acceptance,
            theory.position_acceptance(alpha, k)),
        "lengths": measured_vs_model(
            [str(a) for a in range(k + 1)], shares, theory.acceptance_length_pmf(alpha, k)),
    }


def render_page_message(message: RunMessage) -> dict[str, Any]:
    if message.kind == "cycle":
        event = message.event
        return {
            "chips": _render("_live_cycle.html", event=event),
            "text": event.text,
            "figures": _render("_live_figures.html", running=message.data),
            "generated": message.data["tokens"],
        }
    if message.kind == "summary":
        return {"html": _render("_live_summary.html", s=message.event,
                                **summary_charts(message.event))}
    if message.kind == "saved":
        return {"html": _render("_share_run.html", **message.data)}
    if message.kind == "error":
        return {"message": message.data}
    if message.kind == "queued":
        return {"position": message.data}
    return {}
