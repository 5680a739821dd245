"""Figures of a run from its cycles, as docs/design.md ("The estimators") defines them."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from engine.analytic import theory
from engine.decoder.events import CycleEvent
from engine.decoder.stats import acceptance, per_position_acceptance, summarize


def cycle(n: int, k: int = 4, rejected: bool | None = None, ms=(1.0, 2.0)) -> CycleEvent:
    return CycleEvent(
        index=0,
        tokens=[],
        draft_ms=k * ms[0],
        verify_ms=ms[1],
        cycle_ms=k * ms[0] + ms[1],
        k=k,
        n_accepted=n,
        rejected=n < k if rejected is None else rejected,
        draft_step_ms=[ms[0]] * k,
        overlap=[0.5] * (n + (n < k)),
        n_emitted=n + 1,
    )


def test_summary_figures_follow_the_design_definitions():
    cycles = [cycle(2), cycle(4), cycle(0)]
    s = summarize(cycles, baseline_step_ms=[4.0, 4.0, 5.0, 4.0])
    assert (s.accepted, s.trials, s.drafted, s.tokens) == (6, 8, 12, 9)
    assert s.alpha_counted == 6 / 8
    assert s.alpha_expected == 0.5
    assert s.draft_acceptance_rate == 6 / 12
    assert s.mean_acceptance_length == 1 + 6 / 3
    assert s.acceptance_length_histogram == [1, 0, 1, 0, 1]
    assert s.per_position_acceptance == [2 / 3, 2 / 3, 1 / 3, 1 / 3]
    assert s.step_ms == pytest.approx(4.25)  # the mean target-only step
    assert (s.c, s.v) == (pytest.approx(1 / 4.25), pytest.approx(2 / 4.25))
    assert s.baseline_tok_s == pytest.approx(1000 * 4 / 17)
    assert s.spec_tok_s == pytest.approx(1000 * 9 / 18)
    assert s.speedup_measured == pytest.approx(s.spec_tok_s / s.baseline_tok_s)
    assert s.speedup_predicted == pytest.approx(theory.speedup(0.75, 4, 1 / 4.25, 2 / 4.25))


def test_c_and_v_are_means_so_the_cycle_cost_is_the_mean_cycle():
    """A cycle's first draft step costs more (the verification pass evicted the draft's
    weights from the caches); a median step would leave that out, and the theory would
    then promise more than the total times the measured speedup comes from can give."""
    slow_first = [
        CycleEvent(index=i, tokens=[], draft_ms=6.0, verify_ms=verify, cycle_ms=6.0 + verify,
                   k=4, n_accepted=4, rejected=False, draft_step_ms=[3.0, 1.0, 1.0, 1.0],
                   overlap=[1.0] * 4, n_emitted=5)
        for i, verify in enumerate([4.0, 4.0, 10.0])
    ]
    s = summarize(slow_first, baseline_step_ms=[4.0, 4.0, 4.0, 8.0])
    assert s.draft_step_ms == 1.5 and s.verify_ms == 6.0 and s.step_ms == 5.0
    mean_cycle_ms = sum(c.cycle_ms for c in slow_first) / len(slow_first)
    assert (s.k * s.c + s.v) * s.step_ms == pytest.approx(mean_cycle_ms)


def test_acceptance_needs_no_baseline_and_agrees_with_the_summary():
    cycles = [cycle(2), cycle(4), cycle(0)]
    live = asdict(acceptance(cycles))
    final = summarize(cycles, baseline_step_ms=[4.0])
    for key, value in live.items():
        assert getattr(final, key) == value, key
    assert live["alpha_counted"] == 6 / 8 and live["tokens"] == 9


def test_no_cycles_is_an_error():
    with pytest.raises(ValueError, match="no cycles"):
        acceptance([])


def test_position_i_counts_every_cycle_that_accepted_at_least_i_drafts():
    # 10 cycles at k = 3 accepting exactly 0, 1, 2, 3 drafts: 4, 3, 2 and 1 of them
    assert per_position_acceptance([4, 3, 2, 1]) == [0.6, 0.3, 0.1]
    assert per_position_acceptance([0, 0, 0]) == [0.0, 0.0]  # no cycles yet
