"""Run messages as the page shows them: the API's JSON (:func:`app.run_messages.message_json`)
plus HTML fragments rendered by the page's templates."""

from __future__ import annotations

from typing import Any

from app.charts import measured_vs_model
from app.params import LOOKUP_SLIDERS, SLIDERS
from app.run_messages import MessageKind, RunMessage, message_json
from app.templating import templates
from engine.analytic import geometric, positions, theory
from engine.decoder.events import SummaryEvent


def _render(name: str, **context: Any) -> str:
    return templates.get_template(name).render(**context)


def acceptance_base(summary: SummaryEvent) -> str:
    """What the acceptance charts' shares are of, in words."""
    return "cycles with a proposal" if summary.drafter == "ngram" else "cycles"


def summary_context(summary: SummaryEvent) -> dict[str, Any]:
    """Per-position acceptance against alpha^i, and acceptance lengths against the
    truncated geometric model, both at the counted alpha and both over the cycles with a
    proposal (every cycle, for a draft model); and the measured alpha, k, c, v and step time
    as the slider page's controls can take them ("Use these numbers")."""
    k, alpha = summary.k, summary.alpha_counted
    counted = sum(summary.acceptance_length_histogram)
    shares = [n / counted if counted else None for n in summary.acceptance_length_histogram]
    # the model over the same proposals: their lengths, when the summary has them
    lengths = summary.proposal_lengths or [0] * k + [counted]
    measured = {"alpha": alpha, "k": k, "c": summary.c, "v": summary.v,
                "step_ms": summary.step_ms}
    # Without a counted alpha (no draft was ever tried) there is no model to draw.
    no_model = [None] * (k + 1)
    use = {name: SLIDERS[name].setting(value) for name, value in measured.items()
           if value is not None}
    # The slider model's drafter preset follows the run's drafter; prompt lookup brings its pi.
    use["preset"] = summary.drafter
    if summary.drafter == "ngram":
        use["pi"] = LOOKUP_SLIDERS["pi"].setting(summary.proposal_share)
    else:  # every draft proposed k: its acceptance by position is the curve the slider takes
        curve = positions.measured(summary.per_position_acceptance)
        if curve is not None:
            use["positions"] = ",".join(f"{s:.3g}" for s in curve)
    if summary.tree and "," not in summary.tree:  # the slider draws static trees only
        use["tree"] = summary.tree
    return {
        "use": use,
        "positions": measured_vs_model(
            [str(i) for i in range(1, k + 1)], summary.per_position_acceptance,
            no_model[:k] if alpha is None else theory.position_acceptance(alpha, k)),
        "lengths": measured_vs_model(
            [str(a) for a in range(k + 1)], shares,
            no_model if alpha is None else geometric.length_shares(alpha, lengths)),
        "base": acceptance_base(summary),
        # the same base, short enough for an axis
        "base_short": "proposals" if summary.drafter == "ngram" else "cycles",
    }


def render_page_message(message: RunMessage) -> dict[str, Any]:
    data = message_json(message)
    if message.kind is MessageKind.CYCLE:
        event = message.event
        data |= {
            "chips": _render("_live_cycle.html", event=event, baseline_ms=message.baseline_ms,
                             scale_ms=message.scale_ms),
            "text_html": _render("_live_text.html", tokens=event.tokens),
            "running_html": _render("_live_figures.html", running=message.running),
            "generated": message.running.tokens,
        }
    elif message.kind is MessageKind.SUMMARY:
        data["html"] = _render("_live_summary.html", s=message.event,
                               **summary_context(message.event))
    elif message.kind is MessageKind.SAVED:
        data["html"] = _render("_share_run.html", **data)
    return data
