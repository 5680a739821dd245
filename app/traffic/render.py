"""A probe's result as the page's HTML: its table, its charts and its "Use these numbers"
links (for the live panel and the saved probe's page)."""

from __future__ import annotations

from app.templating import templates
from app.traffic.charts import alpha_bars_chart, alpha_vs_temperature_chart, domain_legend
from app.traffic.numbers import href, row_numbers
from engine.measure.probe_compare import compare


def render_probe(result, ngram=None) -> str:
    """One probe's result; with ``ngram`` (both drafters probed), the winner of each domain and
    temperature first, then the draft model's result and prompt lookup's."""
    if ngram is not None:
        return templates.get_template("_traffic_compare.html").render(
            rows=compare(result, ngram), model_html=render_probe(result),
            ngram_html=render_probe(ngram))
    return templates.get_template("_traffic_result.html").render(
        result=result,
        rows=[(r, href(row_numbers(r)), row_numbers(r)) for r in result.rows],
        by_domain=alpha_bars_chart(result),
        by_temperature=alpha_vs_temperature_chart(result),
        legend=domain_legend(result),
    )
