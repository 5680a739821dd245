"""The overhead terms: what they add to a step and a cycle, and the least-squares fit."""

from __future__ import annotations

import random

import pytest

from engine.analytic import overheads
from engine.analytic.overheads import (
    NONE,
    Overheads,
    cycle_s,
    fit_linear_overhead,
    k0_step_s,
    pass_overhead_s,
    plain_step_s,
    spec_step_overhead_s,
)
from engine.analytic.roofline import HARDWARE, PAIRS, Setting, draft_pass, speedup_at, target_pass
from engine.analytic.theory import expected_tokens

SOME = Overheads(pass_fixed_s=1e-3, pass_per_row_s=2e-5, spec_fixed_s=5e-4, spec_per_row_s=1e-5)


def test_each_term_is_a_fixed_part_plus_a_part_a_row():
    assert pass_overhead_s(SOME, 10) == pytest.approx(1e-3 + 10 * 2e-5)
    assert spec_step_overhead_s(SOME, 10) == pytest.approx(5e-4 + 10 * 1e-5)
    assert pass_overhead_s(NONE, 64) == spec_step_overhead_s(NONE, 64) == 0


def test_a_cycle_pays_the_pass_overhead_on_every_pass_and_the_step_overhead_once():
    k, batch, draft, verify = 3, 8, 2e-3, 9e-3
    expected = k * (draft + pass_overhead_s(SOME, batch)) + verify + pass_overhead_s(SOME, batch) \
        + spec_step_overhead_s(SOME, batch)
    assert cycle_s(draft, verify, k, SOME, batch) == pytest.approx(expected)
    with pytest.raises(ValueError, match="k >= 1"):
        cycle_s(draft, verify, 0, SOME, batch)


def test_k0_is_a_plain_step_plus_the_speculative_step_not_free():
    assert k0_step_s(8e-3, SOME, 32) > plain_step_s(8e-3, SOME, 32) > 8e-3
    assert k0_step_s(8e-3, NONE, 32) == plain_step_s(8e-3, NONE, 32) == 8e-3


def test_without_overheads_the_speedup_is_the_rooflines():
    s = Setting(HARDWARE["h100-sxm"], PAIRS["llama-8b-1b"].target, PAIRS["llama-8b-1b"].draft)
    for batch in (1, 16, 256):
        ours = overheads.speedup(expected_tokens(s.alpha, s.k), draft_pass(s, batch).seconds,
                                 target_pass(s, batch, s.k + 1).seconds,
                                 target_pass(s, batch).seconds, s.k, NONE, batch)
        assert ours == pytest.approx(speedup_at(s, batch))


def test_a_fixed_time_a_pass_lowers_the_speedup_of_a_cheap_draft():
    # k draft passes each pay the fixed time: the cheaper the draft, the more it weighs
    args = (expected_tokens(0.8, 4), 0.2e-3, 5e-3, 5e-3, 4)
    assert overheads.speedup(*args, SOME, 1) < overheads.speedup(*args, NONE, 1)


def test_negative_terms_are_refused():
    with pytest.raises(ValueError, match="pass_fixed_s must be at least 0"):
        Overheads(pass_fixed_s=-1e-3)


def test_the_fit_recovers_a_fixed_time_and_a_time_a_row_from_noisy_rows():
    rng = random.Random(28)
    rows = [(b, 2e-3 + 5e-5 * b + rng.gauss(0, 1e-5)) for b in (1, 2, 4, 8, 16, 32, 64, 128)]
    fit = fit_linear_overhead(rows)
    assert fit.per_row_identified
    assert fit.fixed_s == pytest.approx(2e-3, rel=0.02)
    assert fit.per_row_s == pytest.approx(5e-5, rel=0.02)
    assert fit.rms_s < 3e-5


def test_rows_at_one_batch_cannot_tell_a_fixed_time_from_a_time_a_row():
    fit = fit_linear_overhead([(1, 3e-3), (1, 2e-3)])
    assert not fit.per_row_identified
    assert (fit.fixed_s, fit.per_row_s) == (pytest.approx(2.5e-3), 0.0)


def test_the_fit_holds_both_terms_at_zero_or_above():
    falling = fit_linear_overhead([(1, 3e-3), (64, 1e-3)])  # time a row would be negative
    assert falling.per_row_s == 0 and falling.fixed_s == pytest.approx(2e-3)
    through_origin = fit_linear_overhead([(10, 1e-4), (20, 5e-4)])  # fixed would be negative
    assert through_origin.fixed_s == 0 and through_origin.per_row_s > 0
    assert fit_linear_overhead([(1, -1e-3)]).fixed_s == 0  # faster than the roofline: none
    with pytest.raises(ValueError, match="at least one"):
        fit_linear_overhead([])
