"""Chart geometry: the curve, the marks and the break-even line always in view."""

from __future__ import annotations

import pytest

from app.charts import measured_vs_model, nice_step, speedup_chart
from engine.analytic.theory import figures


@pytest.mark.parametrize("span,step", [(1.0, 0.2), (1.9, 0.5), (7.3, 2), (0.3, 0.1), (17, 5)])
def test_nice_steps_are_1_2_5(span, step):
    assert nice_step(span) == pytest.approx(step)


@pytest.mark.parametrize("alpha,c", [(0.0, 0.5), (0.3, 0.2), (0.7, 0.18), (0.95, 0.05), (1.0, 0.0)])
def test_speedup_chart_keeps_everything_in_view(alpha, c):
    fig = figures(alpha, 4, c)
    chart = speedup_chart(fig)
    for p in chart.points:
        assert chart.top <= p.y <= chart.bottom and chart.left <= p.x <= chart.right
    assert chart.top < chart.break_even_y <= chart.bottom
    assert chart.current.k == 4 and chart.best.k == fig.best_k
    assert chart.y_ticks[0].value == 0 and chart.y_ticks[-1].value >= max(
        p.speedup for p in fig.curve)


def test_higher_speedup_is_drawn_higher():
    chart = speedup_chart(figures(0.8, 4, 0.1))
    by_k = {p.k: p for p in chart.points}
    for a in chart.points:
        for b in chart.points:
            if a.speedup > b.speedup:
                assert by_k[a.k].y < by_k[b.k].y


def test_bars_and_model_points_share_one_scale():
    chart = measured_vs_model(["1", "2", "3"], [0.9, 0.5, 0.2], [0.8, 0.64, 0.51])
    assert [b.label for b in chart.bars] == ["1", "2", "3"]
    assert chart.bars[0].y_measured < chart.bars[0].y_model  # 0.9 is drawn above 0.8
    assert chart.bars[2].y_measured > chart.bars[2].y_model
    assert all(chart.top <= b.y_measured <= chart.bottom for b in chart.bars)


@pytest.mark.parametrize("alpha,c", [(0.95, 0.02), (0.3, 0.3)])
def test_break_even_label_sits_on_the_side_away_from_the_curve_end(alpha, c):
    chart = speedup_chart(figures(alpha, 4, c))
    end_above = chart.points[-1].y < chart.break_even_y
    label_above = chart.break_even_label_y < chart.break_even_y
    assert end_above != label_above


def test_shares_without_data_get_no_bar_and_no_dot():
    chart = measured_vs_model(["1", "2", "3"], [0.6, None, 0.2], [0.7, 0.49, None])
    assert [b.y_measured is None for b in chart.bars] == [False, True, False]
    assert [b.y_model is None for b in chart.bars] == [False, False, True]
    assert chart.model_path.count(",") == 2  # the line joins the two dots there are
    assert measured_vs_model(["1"], [None], [None]).model_path == ""


def test_values_past_one_scale_the_axis_when_it_has_no_ceiling():
    capped = measured_vs_model(["a", "b"], [104.9, 93.8], [105.7, 93.2])
    free = measured_vs_model(["a", "b"], [104.9, 93.8], [105.7, 93.2], ceiling=None)
    assert capped.y_ticks[-1].value == 1.0  # shares stop at 1
    assert free.y_ticks[-1].value >= 105.7 * 1.1 > free.y_ticks[-2].value
    tallest = min(b.y_measured for b in free.bars)
    assert free.top <= tallest < free.bottom  # the bar is drawn to its height, not clipped


def test_the_labels_of_close_lines_at_the_right_end_are_moved_apart():
    """Break-even 0.435 just above acceptance 0.418: both labelled, with their values, at
    least a label's height apart; a chart of one line needs no label."""
    from app.watch.charts import LABEL_GAP, time_chart

    intervals = [{"ended": 100.0 + 10 * i, "state": "moving", "alpha": 0.418,
                  "break_even": 0.435} for i in range(5)]
    chart = time_chart(intervals, "Acceptance", "alpha", [
        ("counted α", "alpha", lambda iv: iv.get("alpha")),
        ("break-even α", "break-even-line", lambda iv: iv.get("break_even"))], y_ceiling=1.0)
    (y_alpha, alpha_text), (y_even, even_text) = (ln.end_label for ln in chart.lines)
    assert alpha_text == "counted α 0.418" and even_text == "break-even α 0.435"
    assert y_alpha - y_even >= LABEL_GAP  # the break-even's label stays above
    single = time_chart(intervals, "Batch", "requests", [("batch", "batch",
                                                           lambda iv: iv.get("alpha"))])
    assert single.lines[0].end_label is None and not single.labelled
