"""A costs file's timings as step costs: lines between and past the timed batches, the
loop's own time in the cycle and the plain step, what is refused, and the timings' spread."""

from __future__ import annotations

import pytest

from engine.analytic.timed_costs import PlanError, TimedCosts, step_spread, timed_costs


def test_timed_costs_are_the_timings_at_timed_batches_and_lines_between_and_past_them():
    passes = []
    for b, step in ((1, 10.0), (4, 13.0), (8, 21.0)):
        passes += [{"model": "target", "batch": b, "tokens": t, "median_ms": step + 2 * (t - 1)}
                   for t in (1, 2, 3)]
        passes.append({"model": "draft", "batch": b, "tokens": 1, "median_ms": step / 10})
    costs = timed_costs(passes)
    assert costs.k_limit == 2
    assert costs.cycle(4, 2) == pytest.approx((2 * 1.3 + 17.0) / 13.0)
    assert costs.time_target(2, 1) == pytest.approx(11.0)  # a third of the way to batch 4
    assert costs.time_target(12, 1) == pytest.approx(29.0)  # on the line through 4 and 8
    with pytest.raises(PlanError, match="k = 2"):
        costs.cycle(1, 3)


def test_timed_costs_refuse_missing_or_impossible_times():
    with pytest.raises(PlanError, match="no timed batches"):
        timed_costs([])
    with pytest.raises(PlanError, match="draft step at batch 2"):
        timed_costs([{"model": "target", "batch": 2, "tokens": 1, "median_ms": 3.0}])
    with pytest.raises(PlanError, match="positive"):
        TimedCosts((1,), {(1, 1): -1.0}, {1: 1.0})
    with pytest.raises(PlanError, match="median_ms"):
        timed_costs([{"model": "target", "batch": 1}])


def test_loop_times_enter_the_cycle_and_the_plain_step_alike():
    passes = [{"model": "target", "batch": 1, "tokens": t, "median_ms": 10.0} for t in (1, 2, 3)]
    passes.append({"model": "draft", "batch": 1, "tokens": 1, "median_ms": 1.0})
    without = timed_costs(passes)
    loop = [{"batch": 1, "k": 0, "median_ms": 2.0}, {"batch": 1, "k": 1, "median_ms": 5.0},
            {"batch": 1, "k": 2, "median_ms": 6.0}]
    with_loop = timed_costs(passes, loop)
    assert without.cycle(1, 2) == pytest.approx((2 * 1.0 + 10.0) / 10.0)
    # (k t_q + t_p(k + 1) + loop(k)) / (t_p(1) + loop(0))
    assert with_loop.cycle(1, 2) == pytest.approx((2 * 1.0 + 10.0 + 6.0) / 12.0)
    assert with_loop.cycle(1, 1) == pytest.approx((1.0 + 10.0 + 5.0) / 12.0)


def test_loop_times_limit_k_and_need_the_plain_step():
    passes = [{"model": "target", "batch": 1, "tokens": t, "median_ms": 10.0} for t in (1, 2, 3)]
    passes.append({"model": "draft", "batch": 1, "tokens": 1, "median_ms": 1.0})
    loop = [{"batch": 1, "k": 0, "median_ms": 2.0}, {"batch": 1, "k": 1, "median_ms": 5.0}]
    assert timed_costs(passes, loop).k_limit == 1
    with pytest.raises(PlanError, match="k = 0"):
        timed_costs(passes, loop[1:])
    with pytest.raises(PlanError, match="loop"):
        timed_costs(passes, [{"batch": 1}])


def test_a_costs_files_steps_give_the_spread_held_from_the_batch_below():
    steps = [{"batch": 1, "k": 1, "step_ms": 10.0, "step_mad_ms": 0.5},
             {"batch": 8, "k": 1, "step_ms": 20.0, "step_mad_ms": 0.2}]
    spread = step_spread(steps)
    assert spread(1, 1) == spread(4, 1) == 0.05 and spread(8, 1) == spread(64, 1) == 0.01
    assert spread(4, 3) == 0.0  # a k not timed there adds no spread
    assert step_spread([{"batch": 1, "k": 1, "step_ms": 10.0}]) is None  # old file
