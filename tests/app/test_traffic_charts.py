"""Geometry of the traffic panel's two charts, computed in Python."""

from __future__ import annotations

import pytest

from app.traffic.charts import alpha_by_domain_chart, alpha_vs_temperature_chart, spread_labels
from engine.measure.probe import ProbeResult, ProbeRow


def row(domain: str, t: float, alpha: float, low: float, high: float) -> ProbeRow:
    return ProbeRow(domain, t, 4, 8, 100, 40, 60, 160, 90, alpha, [low, high], None, None, None,
                    None, [alpha], [alpha], 0.4, 2.5, 0.1, 1.2, 5.0, 1.5, 4, 1.6)


RESULT = ProbeResult("specscope", "t", "d", 4, [0.0, 1.0], 1.0, 32, 0, 100, [
    row("scripture", 0.0, 0.8, 0.7, 0.9), row("python", 0.0, 0.4, 0.3, 0.5),
    row("scripture", 1.0, 0.7, 0.6, 0.8), row("python", 1.0, 0.41, 0.35, 0.47)], 4, 4, True)


def test_bars_one_per_row_with_the_interval_around_the_top():
    chart = alpha_by_domain_chart(RESULT)
    assert len(chart.bars) == 4 and [g.label for g in chart.groups] == ["scripture", "python"]
    for b in chart.bars:
        assert chart.top <= b.y_high <= b.y <= b.y_low <= chart.bottom
        assert chart.left <= b.x and b.x + b.width <= chart.right
    full = chart.bottom - chart.top
    assert chart.bottom - chart.bars[0].y == pytest.approx(0.8 * full)
    # the bars of one domain sit together, left of the next domain's
    xs = {b.label: b.x for b in chart.bars}
    assert xs["scripture, T = 0"] < xs["scripture, T = 1"] < xs["python, T = 0"]


def test_lines_one_per_domain_and_labels_never_overlap():
    chart = alpha_vs_temperature_chart(RESULT)
    assert [line.label for line in chart.lines] == ["scripture", "python"]
    assert [p.x for p in chart.lines[0].points] == [chart.left, chart.right]
    assert [label for _, label in chart.x_ticks] == ["0", "1"]
    ys = spread_labels([100.0, 101.0, 102.0, 240.0], top=10, bottom=241)
    assert all(b - a >= 13 for a, b in zip(sorted(ys), sorted(ys)[1:], strict=False))
    assert max(ys) <= 241 and ys[0] == 100.0


def test_a_row_without_an_alpha_is_left_out_of_both_charts_and_shown_as_a_dash():
    from dataclasses import replace

    from app.traffic.render import render_probe

    empty = replace(row("lookup", 0.0, 0.0, 0.0, 0.0), alpha_counted=None,
                    alpha_counted_ci=None, per_position_acceptance=[None],
                    alpha_powers=[None], draft_acceptance_rate=None,
                    mean_acceptance_length=None, speedup_predicted=None, best_k=None,
                    best_speedup=None)
    result = replace(RESULT, rows=[*RESULT.rows, empty])
    assert len(alpha_by_domain_chart(result).bars) == 4
    assert [line.label for line in alpha_vs_temperature_chart(result).lines] == [
        "scripture", "python"]
    html = render_probe(result)
    lookup = html.split('data-domain="lookup"')[1].split("</tr>")[0]
    assert 'data-alpha="—"' in lookup
    assert lookup.count("<td>—</td>") == 3  # counted alpha, draft acceptance rate, length
