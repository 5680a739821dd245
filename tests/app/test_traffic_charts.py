"""Geometry of the traffic panel's two charts, computed in Python."""

from __future__ import annotations

import pytest

from app.traffic.charts import alpha_bars_chart, alpha_vs_temperature_chart, domain_legend
from engine.measure.probe import ProbeResult, ProbeRow


def row(domain: str, t: float, alpha: float, low: float, high: float) -> ProbeRow:
    return ProbeRow(domain, t, 4, 8, 100, 40, 60, 160, 90, alpha, [low, high], None, None, None,
                    None, [alpha], [alpha], 0.4, 2.5, 0.1, 1.2, 5.0, 1.5, 4, 1.6)


RESULT = ProbeResult("specscope", "t", "d", 4, [0.0, 1.0], 1.0, 32, 0, 100, [
    row("scripture", 0.0, 0.8, 0.7, 0.9), row("python", 0.0, 0.4, 0.3, 0.5),
    row("scripture", 1.0, 0.7, 0.6, 0.8), row("python", 1.0, 0.41, 0.35, 0.47)], 4, 4, True)


def test_bars_one_per_row_with_the_interval_around_the_top():
    chart = alpha_bars_chart(RESULT)
    assert len(chart.bars) == 4 and [g.label for g in chart.groups] == ["T = 0", "T = 1"]
    for b in chart.bars:
        assert chart.top <= b.y_high <= b.y <= b.y_low <= chart.bottom
        assert chart.left <= b.x and b.x + b.width <= chart.right
    full = chart.bottom - chart.top
    assert chart.bottom - chart.bars[0].y == pytest.approx(0.8 * full)
    # the bars of one temperature sit together, left of the next temperature's
    xs = {b.label: b.x for b in chart.bars}
    assert xs["scripture, T = 0"] < xs["python, T = 0"] < xs["scripture, T = 1"]


def test_lines_one_per_domain():
    chart = alpha_vs_temperature_chart(RESULT)
    assert [line.label for line in chart.lines] == ["scripture", "python"]
    assert [p.x for p in chart.lines[0].points] == [chart.left, chart.right]
    assert [label for _, label in chart.x_ticks] == ["0", "1"]


def test_colour_means_the_domain_in_both_charts_and_the_legend_names_it():
    bars, lines = alpha_bars_chart(RESULT), alpha_vs_temperature_chart(RESULT)
    legend = {entry.label: entry.series for entry in domain_legend(RESULT)}
    assert legend == {"scripture": 0, "python": 1}
    for b in bars.bars:
        assert b.series == legend[b.label.split(",")[0]]
    for line in lines.lines:
        assert line.series == legend[line.label]
        assert {p.series for p in line.points} == {legend[line.label]}


def test_the_probe_html_has_one_legend_and_no_text_below_the_bars():
    from app.traffic.render import render_probe

    html = render_probe(RESULT)
    legend = html.split('class="legend domain-legend"')[1].split("</ul>")[0]
    assert legend.count("<li>") == 2 and "scripture" in legend and "python" in legend
    assert 'class="axis small"' not in html and 'class="line-label"' not in html


def test_a_row_without_an_alpha_is_left_out_of_both_charts_and_shown_as_a_dash():
    from dataclasses import replace

    from app.traffic.render import render_probe

    empty = replace(row("lookup", 0.0, 0.0, 0.0, 0.0), alpha_counted=None,
                    alpha_counted_ci=None, per_position_acceptance=[None],
                    alpha_powers=[None], draft_acceptance_rate=None,
                    mean_acceptance_length=None, speedup_predicted=None, best_k=None,
                    best_speedup=None)
    result = replace(RESULT, rows=[*RESULT.rows, empty])
    assert len(alpha_bars_chart(result).bars) == 4
    assert [line.label for line in alpha_vs_temperature_chart(result).lines] == [
        "scripture", "python"]
    html = render_probe(result)
    lookup = html.split('data-domain="lookup"')[1].split("</tr>")[0]
    assert 'data-alpha="—"' in lookup
    assert lookup.count("<td>—</td>") == 3  # counted alpha, draft acceptance rate, length
