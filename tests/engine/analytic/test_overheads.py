"""The overhead terms: what each adds to a pass, a step and a cycle, charged to whoever pays
it, and the least-squares fits."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from engine.analytic import overheads
from engine.analytic.break_even import speedup_at
from engine.analytic.overheads import (
    NONE,
    Overheads,
    cycle_s,
    fit_launch,
    fit_linear_overhead,
    k0_step_s,
    launch_s,
    plain_step_s,
    sample_s,
    spec_step_overhead_s,
)
from engine.analytic.passes import Setting, draft_pass, target_pass
from engine.analytic.presets import HARDWARE, PAIRS
from engine.analytic.theory import expected_tokens

SOME = Overheads(launch_s_per_layer=20e-6, sample_s_per_row=2e-6, spec_fixed_s=5e-4,
                 spec_per_row_s=1e-5, step_fixed_s=3e-4, draft_fixed_s=2e-4,
                 schedule_fixed_s=7e-4, schedule_per_row_s=8e-5)


def test_each_term_is_charged_by_its_cause():
    assert launch_s(SOME, 32) == pytest.approx(32 * 20e-6)  # a pass: its own model's layers
    assert sample_s(SOME, 10) == pytest.approx(10 * 2e-6)  # a step: its rows
    assert spec_step_overhead_s(SOME, 10) == pytest.approx(5e-4 + 10 * 1e-5)
    assert launch_s(NONE, 80) == sample_s(NONE, 64) == spec_step_overhead_s(NONE, 64) == 0


def test_a_cycle_pays_each_pass_its_own_launch_and_the_step_terms_once():
    k, batch, draft, verify = 3, 8, 2e-3, 9e-3
    expected = (k * (draft + launch_s(SOME, 16) + SOME.draft_fixed_s) + verify
                + launch_s(SOME, 32) + sample_s(SOME, batch) + SOME.step_fixed_s
                + spec_step_overhead_s(SOME, batch))
    assert cycle_s(draft, verify, k, SOME, batch, 16, 32) == pytest.approx(expected)
    with pytest.raises(ValueError, match="k >= 1"):
        cycle_s(draft, verify, 0, SOME, batch, 16, 32)


def test_a_draft_never_pays_for_the_batch_its_rows_are_sampled_once_a_step():
    """The row term is the sampler's: a step of 1,024 rows pays it once, not k + 1 times."""
    one, many = (cycle_s(1e-3, 5e-3, 4, SOME, batch, 16, 32) for batch in (1, 1024))
    assert many - one == pytest.approx(1023 * (2e-6 + 1e-5))


def test_k0_is_a_plain_step_plus_what_the_schedule_adds_not_free():
    plain = plain_step_s(8e-3, SOME, 32, 32)
    assert plain == pytest.approx(8e-3 + 32 * 20e-6 + 32 * 2e-6 + 3e-4)
    assert k0_step_s(8e-3, SOME, 32, 32) == pytest.approx(plain + 7e-4 + 32 * 8e-5)
    assert k0_step_s(8e-3, NONE, 32, 32) == plain_step_s(8e-3, NONE, 32, 32) == 8e-3


def test_a_fixed_k_cycle_never_pays_the_schedule_and_each_draft_pass_pays_its_own_time():
    no_schedule = replace(SOME, schedule_fixed_s=0.0, schedule_per_row_s=0.0)
    args = (1e-3, 9e-3, 4, SOME, 32, 16, 32)
    assert cycle_s(*args) == cycle_s(1e-3, 9e-3, 4, no_schedule, 32, 16, 32)
    more = replace(SOME, draft_fixed_s=SOME.draft_fixed_s + 1e-4)
    assert cycle_s(1e-3, 9e-3, 4, more, 32, 16, 32) == pytest.approx(cycle_s(*args) + 4e-4)


def test_without_overheads_the_speedup_is_the_rooflines():
    s = Setting(HARDWARE["h100-sxm"], PAIRS["llama-8b-1b"].target, PAIRS["llama-8b-1b"].draft)
    for batch in (1, 16, 256):
        ours = overheads.speedup(expected_tokens(s.alpha, s.k), draft_pass(s, batch).seconds,
                                 target_pass(s, batch, s.k + 1).seconds,
                                 target_pass(s, batch).seconds, s.k, NONE, batch,
                                 s.draft.layers, s.target.layers)
        assert ours == pytest.approx(speedup_at(s, batch))


def test_a_launch_time_lowers_the_speedup_of_a_cheap_draft():
    # k draft passes each launch their layers: the cheaper the draft, the more it weighs
    args = (expected_tokens(0.8, 4), 0.2e-3, 5e-3, 5e-3, 4)
    assert overheads.speedup(*args, SOME, 1, 16, 32) < overheads.speedup(*args, NONE, 1, 16, 32)


def test_the_launch_fit_recovers_a_launch_and_an_all_reduce_depth_from_noisy_rows():
    rng = random.Random(36)
    rows = [(layers, 2 * layers * depth, 5e-6 * layers + 6e-6 * 2 * layers * depth
             + rng.gauss(0, 2e-6))
            for layers in (16, 32, 80) for depth in (0, 1, 2, 3)]
    fit = fit_launch(rows)
    assert fit.launch_s_per_layer == pytest.approx(5e-6, rel=0.05)
    assert fit.allreduce_s_per_log2 == pytest.approx(6e-6, rel=0.05)
    assert fit.rows == 12 and fit.rms < 4e-6


def test_the_launch_fit_holds_both_terms_at_zero_or_above():
    # one GPU only: no all-reduce to fit; a residual below the roofline: no launch
    assert fit_launch([(32, 0.0, 1e-3), (80, 0.0, 2.5e-3)]).allreduce_s_per_log2 == 0
    assert fit_launch([(32, 0.0, -1e-3)]).launch_s_per_layer == 0
    falling = fit_launch([(32, 0.0, 1e-3), (32, 64.0, 1e-3)])  # more GPUs, no more time
    assert falling.allreduce_s_per_log2 == 0 and falling.launch_s_per_layer > 0
    with pytest.raises(ValueError, match="at least one"):
        fit_launch([])


def test_negative_terms_are_refused():
    for name in ("launch_s_per_layer", "sample_s_per_row", "allreduce_s_per_log2"):
        with pytest.raises(ValueError, match=f"{name} must be at least 0"):
            Overheads(**{name: -1e-3})


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
