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


def lookup_cycle(n: int, proposed: int, lookup_ms: float = 0.1, verify_ms: float = 6.0):
    """A prompt-lookup cycle: ``proposed`` tokens (0 = a plain target step), one lookup."""
    rejected = n < proposed
    return CycleEvent(
        index=0, tokens=[], draft_ms=lookup_ms,
        verify_ms=verify_ms if proposed else 4.0, cycle_ms=lookup_ms + verify_ms,
        k=4, n_accepted=n, rejected=rejected, draft_step_ms=[lookup_ms],
        overlap=[0.9] * (n + rejected), n_emitted=n + 1, drafter="ngram", n_proposed=proposed,
    )


def test_lookup_cycles_count_alpha_over_proposed_tokens_and_price_pi():
    # a full proposal all accepted, a short one rejected at its 2nd token, two empty cycles
    cycles = [lookup_cycle(4, 4), lookup_cycle(1, 2), lookup_cycle(0, 0), lookup_cycle(0, 0)]
    s = summarize(cycles, baseline_step_ms=[4.0, 4.0, 4.0])
    assert (s.accepted, s.trials, s.drafted) == (5, 6, 6)  # the empty cycles add no trials
    assert s.alpha_counted == 5 / 6
    assert s.draft_acceptance_rate == 5 / 6
    assert s.mean_acceptance_length == 1 + 5 / 2  # over cycles that proposed, as vLLM counts
    assert (s.drafter, s.proposal_share, s.proposed_per_cycle) == ("ngram", 0.5, 3.0)
    assert s.c == pytest.approx(0.1 / 4)  # the lookup, once a cycle
    assert s.v == pytest.approx(6.0 / 4)  # cycles with a proposal only
    e_given = (theory.expected_tokens(5 / 6, 4) + theory.expected_tokens(5 / 6, 2)) / 2
    predicted = (0.5 * e_given + 0.5) / (0.5 * 1.5 + 0.5 + 0.1 / 4)
    assert s.speedup_predicted == pytest.approx(predicted)


def test_a_run_without_any_proposal_is_summarised_without_dividing_by_zero():
    s = summarize([lookup_cycle(0, 0), lookup_cycle(0, 0)], baseline_step_ms=[4.0])
    # no data: None (engine.analytic.acceptance), never 0 or 1
    assert (s.alpha_counted, s.alpha_expected, s.draft_acceptance_rate) == (None, None, None)
    assert (s.proposal_share, s.mean_acceptance_length) == (0.0, None)
    assert s.speedup_predicted == pytest.approx(1 / (1 + 0.1 / 4))


def test_lookup_acceptance_lengths_count_the_cycles_with_a_proposal():
    """One base for the figures that sit side by side: the histogram, like the per-position
    shares and alpha, leaves out the cycles that proposed nothing (they accepted nothing
    because nothing was tried, which the geometric model does not describe)."""
    cycles = [lookup_cycle(4, 4), lookup_cycle(1, 2), lookup_cycle(0, 0), lookup_cycle(0, 0)]
    s = summarize(cycles, baseline_step_ms=[4.0])
    assert s.acceptance_length_histogram == [0, 1, 0, 0, 1]
    assert s.proposal_lengths == [2, 0, 1, 0, 1]
    assert s.per_position_acceptance == [1.0, 0.5, 1.0, 1.0]


def test_all_or_nothing_cycles_predict_below_independence_and_fail_the_geometric():
    """45 cycles accept nothing and 50 accept all 4: the tokens a cycle yields fall below
    E(T) at the same alpha, and the chi-square against the truncated geometric says so."""
    cycles = [cycle(0)] * 45 + [cycle(1), cycle(1), cycle(2), cycle(2), cycle(3)] + [cycle(4)] * 50
    s = summarize(cycles, baseline_step_ms=[4.0])
    tokens = (45 * 1 + 2 * 2 + 2 * 3 + 4 + 50 * 5) / 100
    assert s.speedup_from_histogram == pytest.approx(tokens / theory.cycle_cost(4, s.c, s.v))
    assert s.speedup_from_histogram < s.speedup_predicted
    assert s.geometric_df == 3 and s.geometric_p < 1e-6 and s.geometric_chi2 > 30


def test_a_one_token_draft_has_nothing_to_test():
    s = summarize([cycle(0, k=1), cycle(1, k=1)], baseline_step_ms=[4.0])
    assert (s.geometric_chi2, s.geometric_df, s.geometric_p) == (None, 0, None)
    assert s.speedup_from_histogram == pytest.approx(1.5 / theory.cycle_cost(1, s.c, s.v))


def test_a_summary_is_finite_where_the_model_calls_a_count_impossible(monkeypatch):
    """A saved run must be JSON: an infinite chi-square is kept as none, its p as 0."""
    import json

    from engine.analytic import geometric

    monkeypatch.setattr(geometric, "acceptance_length_pmf", lambda alpha, m: [0.0] * m + [1.0])
    s = summarize([cycle(0), cycle(4)], baseline_step_ms=[4.0])
    assert (s.geometric_chi2, s.geometric_p) == (None, 0.0)
    json.dumps(asdict(s), allow_nan=False)
