"""The interval every speedup carries: percentiles of held-out residuals, and a coverage that
is checked by leaving each held-out point out in turn."""

from __future__ import annotations

import math
import random

import pytest

from engine.analytic import intervals, validate
from engine.analytic.intervals import interval, quantile, wilson


def test_quantiles_interpolate_between_order_statistics():
    assert quantile([3, 1, 2], 0.5) == 2
    assert quantile([0, 10], 0.1) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_wilson_brackets_the_proportion_and_narrows_with_n():
    lo, hi = wilson(8, 10)
    assert lo < 0.8 < hi
    lo_big, hi_big = wilson(800, 1000)
    assert lo < lo_big < 0.8 < hi_big < hi


def test_a_model_that_runs_high_gets_an_interval_below_its_value():
    rng = random.Random(1)
    residuals = [0.3 + rng.gauss(0, 0.05) for _ in range(50)]  # 35 % high, give or take
    band = interval(residuals, "speedup")
    low, high = band.of(2.0)
    assert high < 2.0 and low == pytest.approx(2.0 * math.exp(-quantile(residuals, 0.9)))


def test_on_draws_from_one_distribution_about_80_percent_fall_inside():
    rng = random.Random(7)
    residuals = [rng.gauss(0, 0.2) for _ in range(400)]
    band = interval(residuals, "speedup")
    assert band.coverage[0] < 0.8 < band.coverage[1]
    assert abs(band.inside / band.n - 0.8) < 0.06


def test_too_few_points_are_refused():
    with pytest.raises(ValueError, match="at least 3"):
        interval([0.1, 0.2], "speedup")


def test_a_step_time_counts_as_its_rate():
    class Point:
        model, measured = 5.0, 10.0  # ms: the model's step is twice as fast

    class Series:
        split, quantity, points = "held_out", "tpot_ms", (Point(),)

    (r,) = intervals.residuals_of([Series()], "speed")
    assert r == pytest.approx(math.log(2))


def test_the_published_and_own_held_out_speedups_cover_about_80_percent():
    """The report's own interval: its leave-one-out coverage's 95 % interval holds 80 %."""
    band = validate.run().intervals["speedup"]
    assert band.n >= 20
    assert band.coverage[0] <= 0.8 <= band.coverage[1], band.describe()
    assert band.low < 1 < band.high  # the model is neither always high nor always low
