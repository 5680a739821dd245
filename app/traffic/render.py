"""A probe's result as the page's HTML: its table, its charts and its "Use these numbers"
links (for the live panel and the saved probe's page)."""

from __future__ import annotations

from app.templating import templates
from app.traffic.charts import alpha_by_domain_chart, alpha_vs_temperature_chart
from app.traffic.numbers import href, row_numbers


def render_probe(result) -> str:
    return templates.get_template("_traffic_result.html").render(
        result=result,
        rows=[(r, href(row_numbers(r)), row_numbers(r)) for r in result.rows],
        by_domain=alpha_by_domain_chart(result),
        by_temperature=alpha_vs_temperature_chart(result),
    )
