"""The break-even alpha: where k drafts a cycle stop paying on measured step costs."""

from __future__ import annotations

import pytest

from engine.analytic.break_even_alpha import (
    CostsError,
    break_even,
    break_even_alpha,
    expected_tokens,
    planned_k,
    step_costs,
)
from engine.analytic.timed_costs import timed_costs


def costs(ms: dict[int, tuple[float, float, float]], k: int = 4) -> dict:
    """A costs file: per batch (plain step, draft step, verification over 2..k+1 tokens)."""
    passes = []
    for batch, (plain, draft, verify) in ms.items():
        passes += [{"model": "target", "batch": batch, "tokens": 1, "median_ms": plain},
                   {"model": "draft", "batch": batch, "tokens": 1, "median_ms": draft}]
        passes += [{"model": "target", "batch": batch, "tokens": t + 1, "median_ms": verify}
                   for t in range(1, k + 1)]
    return {"method": "vllm-steps", "passes": passes}


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("cycle", [1.2, 1.9, 2.5])
def test_the_break_even_alpha_yields_as_many_tokens_as_the_cycle_costs(k, cycle):
    alpha = break_even_alpha(cycle, k)
    if cycle >= k + 1:
        assert alpha is None
        return
    assert 0 < alpha < 1
    assert expected_tokens(alpha, k) == pytest.approx(cycle, abs=1e-12)
    # just below it speculation loses, just above it pays
    assert expected_tokens(alpha - 1e-6, k) < cycle < expected_tokens(alpha + 1e-6, k)


def test_expected_tokens_is_the_closed_form():
    for alpha in (0.0, 0.3, 0.71, 0.99):
        assert expected_tokens(alpha, 4) == pytest.approx((1 - alpha**5) / (1 - alpha))
    assert expected_tokens(1.0, 4) == 5


def test_a_cycle_no_dearer_than_a_step_pays_at_any_alpha_and_one_of_k_plus_1_steps_never():
    assert break_even_alpha(1.0, 4) == 0.0
    assert break_even_alpha(0.8, 4) == 0.0
    assert break_even_alpha(5.0, 4) is None
    assert break_even_alpha(7.0, 4) is None


def test_a_longer_draft_at_the_same_cost_breaks_even_lower():
    assert break_even_alpha(1.8, 4) < break_even_alpha(1.8, 2) < break_even_alpha(1.8, 1)
    assert break_even_alpha(1.8, 1) == pytest.approx(0.8)  # E_1 = 1 + alpha


@pytest.mark.parametrize("cycle, k", [(0.0, 2), (-1.0, 2), (float("nan"), 2), (2.0, 0)])
def test_bad_arguments_are_refused(cycle, k):
    with pytest.raises(ValueError):
        break_even_alpha(cycle, k)


def test_the_cycle_follows_the_plans_reading_of_the_same_costs():
    data = costs({1: (10.0, 1.5, 11.0), 4: (12.0, 2.0, 16.0), 16: (20.0, 4.0, 40.0)})
    ours = step_costs(data)
    theirs = timed_costs(data["passes"])
    for batch in (1, 2, 3, 4, 7, 16, 20, 64):
        for k in (1, 2, 4):
            assert ours.cycle(batch, k) == pytest.approx(theirs.cycle(batch, k))
    assert ours.k_limit == 4


def test_the_break_even_at_a_batch_from_the_costs():
    data = costs({1: (10.0, 1.0, 12.0)})
    # k = 4: (4 * 1 + 12) / 10 = 1.6 steps
    alpha = break_even(step_costs(data), 1, 4)
    assert expected_tokens(alpha, 4) == pytest.approx(1.6)
    with pytest.raises(CostsError, match="up to k = 4"):
        step_costs(data).cycle(1, 5)


@pytest.mark.parametrize("data, message", [
    ({}, "no \"passes\""),
    ({"passes": []}, "no \"passes\""),
    ({"passes": [{"model": "target", "batch": 1}]}, "needs"),
    ({"passes": [{"model": "target", "batch": 1, "tokens": 1, "median_ms": -2},
                 {"model": "draft", "batch": 1, "tokens": 1, "median_ms": 1}]}, "positive"),
    ({"passes": [{"model": "target", "batch": 1, "tokens": 1, "median_ms": 2}]}, "draft step"),
])
def test_a_file_that_is_not_costs_is_refused_saying_why(data, message):
    with pytest.raises(CostsError, match=message):
        step_costs(data)


def test_the_planned_k_is_the_one_vllm_looks_up():
    """vLLM's build_dynamic_sd_schedule_lookup: the range holding the batch; in a gap the
    previous range's k; past the last range the last k (the slow test in
    tests/engine/test_cli_plan.py holds planned_k against vLLM's own function)."""
    ranges = [[1, 1, 4], [2, 3, 2], [6, 13, 3], [15, 19, 0], [20, 64, 1]]
    expected = [4] + [2] * 4 + [3] * 9 + [0] * 5 + [1] * 81  # batches 1..100
    assert [planned_k(ranges, b, 4) for b in range(1, 101)] == expected
    assert planned_k([[4, 8, 3]], 2) == 0  # before the first range
    assert planned_k([[1, 8, 6]], 3, k_cap=4) == 4
