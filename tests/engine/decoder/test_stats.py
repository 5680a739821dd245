"""Figures of a run from its cycles, as docs/design.md ("The estimators") defines them."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from engine.analytic import theory
from engine.decoder.events import CycleEvent
from engine.decoder.stats import acceptance, summarize


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
    assert (s.step_ms, s.c, s.v) == (4.0, 0.25, 0.5)
    assert s.baseline_tok_s == pytest.approx(1000 * 4 / 17)
    assert s.spec_tok_s == pytest.approx(1000 * 9 / 18)
    assert s.speedup_measured == pytest.approx(s.spec_tok_s / s.baseline_tok_s)
    assert s.speedup_predicted == pytest.approx(theory.speedup(0.75, 4, 0.25, 0.5))


def test_acceptance_needs_no_baseline_and_agrees_with_the_summary():
    cycles = [cycle(2), cycle(4), cycle(0)]
    live = asdict(acceptance(cycles))
    final = summarize(cycles, baseline_step_ms=[4.0])
    for key, value in live.items():
        assert getattr(final, key) == value, key
    assert live["alpha_counted"] == 6 / 8 and live["tokens"] == 9


def test_no_cycles_give_no_figures_yet():
    live = acceptance([])
    assert (live.cycles, live.tokens, live.trials) == (0, 0, 0)
    assert (live.alpha_counted, live.alpha_expected, live.draft_acceptance_rate,
            live.mean_acceptance_length, live.spec_tok_s) == (None,) * 5


def test_no_cycles_cannot_be_summarised():
    with pytest.raises(ValueError, match="no cycles"):
        summarize([], baseline_step_ms=[4.0])


def test_position_i_counts_every_cycle_that_accepted_at_least_i_drafts():
    # 10 cycles at k = 3 accepting exactly 0, 1, 2, 3 drafts: 4, 3, 2 and 1 of them
    cycles = [cycle(n, k=3) for n, times in enumerate([4, 3, 2, 1]) for _ in range(times)]
    s = summarize(cycles, baseline_step_ms=[4.0])
    assert s.acceptance_length_histogram == [4, 3, 2, 1]
    assert s.per_position_acceptance == [0.6, 0.3, 0.1]
