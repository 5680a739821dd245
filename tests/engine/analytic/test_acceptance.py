"""The acceptance estimators, as docs/design.md ("The estimators") defines them: for cycles of
any proposal length (0..k, as a prompt-lookup drafter makes them), with None for no data."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.analytic import acceptance as acc
from engine.analytic import theory

K_MAX = 8


@st.composite
def a_cycle(draw, k_max: int = K_MAX, min_proposed: int = 0) -> tuple[int, int]:
    proposed = draw(st.integers(min_proposed, k_max))
    return proposed, draw(st.integers(0, proposed))


cycles = st.lists(a_cycle(), max_size=40)


@st.composite
def fixed_k_cycles(draw) -> tuple[int, list[tuple[int, int]]]:
    k = draw(st.integers(1, K_MAX))
    accepted = draw(st.lists(st.integers(0, k), max_size=40))
    return k, [(k, a) for a in accepted]


# ---- one cycle -------------------------------------------------------------------------------


def test_a_cycle_tries_its_accepted_drafts_and_the_one_it_rejected():
    assert acc.cycle_trials(4, 2) == 3  # accepted 2, the third was rejected
    assert acc.cycle_trials(4, 4) == 4  # all accepted: cut at k, no failure
    assert acc.cycle_trials(4, 0) == 1  # the first was rejected
    assert acc.cycle_trials(2, 2) == 2  # a short proposal, all accepted
    assert acc.cycle_trials(0, 0) == 0  # no proposal: nothing tried


@pytest.mark.parametrize("proposed, accepted", [(2, 3), (-1, 0), (3, -1)])
def test_a_cycle_cannot_accept_more_than_it_proposed(proposed, accepted):
    with pytest.raises(ValueError, match="accepts 0..proposed"):
        acc.cycle_trials(proposed, accepted)


# ---- no data is None -------------------------------------------------------------------------


def test_no_cycles_give_no_estimates():
    t = acc.tally([])
    assert t == acc.Tally()
    assert (t.alpha_counted, t.draft_acceptance_rate, t.mean_acceptance_length,
            t.proposal_share) == (None, None, None, None)
    assert t.per_position(3) == [None, None, None]


def test_cycles_without_a_proposal_give_no_estimates_but_count_as_cycles():
    t = acc.tally([(0, 0)] * 5)
    assert (t.cycles, t.proposing, t.trials) == (5, 0, 0)
    assert (t.alpha_counted, t.draft_acceptance_rate, t.mean_acceptance_length) == (None,) * 3
    assert t.proposal_share == 0.0
    assert t.per_position(2) == [None, None]


def test_the_ratio_functions_say_none_for_a_zero_denominator():
    assert acc.counted_alpha(0, 0) is None
    assert acc.draft_acceptance_rate(0, 0) is None
    assert acc.mean_acceptance_length(0, 0) is None
    assert acc.per_position([0, 0], [3, 0]) == [0.0, None]
    assert acc.per_position_vllm([0, 0], 0) == [None, None]
    assert acc.counted_alpha_vllm(0, 0, [0, 0]) is None
    assert acc.counted_alpha_vllm(5, 5, []) is None  # k = 0: no positions


# ---- worked examples --------------------------------------------------------------------------


def test_short_and_empty_proposals_worked_example():
    # k = 4; a prompt-lookup drafter proposes 4, 2, 0 and 3 tokens
    t = acc.tally([(4, 4), (2, 1), (0, 0), (3, 0)])
    assert (t.cycles, t.proposing, t.proposed, t.accepted) == (4, 3, 9, 5)
    assert t.trials == 4 + 2 + 0 + 1
    assert t.alpha_counted == 5 / 7
    assert t.draft_acceptance_rate == 5 / 9
    assert t.mean_acceptance_length == 1 + 5 / 3
    assert t.proposal_share == 3 / 4
    # position 1: proposed by 3 cycles, accepted by 2; position 3: proposed by 2, accepted by 1
    assert t.offered == (3, 3, 2, 1) and t.taken == (2, 1, 1, 1)
    assert t.per_position() == [2 / 3, 1 / 3, 1 / 2, 1.0]
    assert t.per_position(5) == [2 / 3, 1 / 3, 1 / 2, 1.0, None]


def test_vllm_counters_worked_example():
    # k = 3, 10 drafts accepting exactly 0, 1, 2, 3 tokens: 4, 3, 2 and 1 of them
    per_pos, drafts = [6, 3, 1], 10
    accepted = 3 * 1 + 2 * 2 + 1 * 3
    assert acc.per_position_vllm(per_pos, drafts) == [0.6, 0.3, 0.1]
    assert acc.trials_vllm(accepted, drafts, per_pos) == accepted + 9
    assert acc.counted_alpha_vllm(accepted, drafts, per_pos) == 10 / 19
    assert acc.histogram_vllm(drafts, per_pos) == [4, 3, 2, 1]


@pytest.mark.parametrize("drafts, accepted, per_pos", [
    (10, 7, [6, 7]),  # rises
    (5, 6, [6]),  # more than the drafts
    (10, 8, [6, 3]),  # does not sum to accepted
    (10, -3, [-3]),  # negative
])
def test_inconsistent_vllm_counts_are_refused(drafts, accepted, per_pos):
    with pytest.raises(ValueError, match="do not fit"):
        acc.check_vllm_counts(drafts, accepted, per_pos)


@given(st.floats(0.0, 0.999), st.integers(1, K_MAX))
def test_the_iid_fit_inverts_the_expected_accepted_drafts(alpha, k):
    mean = theory.expected_accepted(alpha, k)
    assert acc.alpha_from_mean_accepted(mean, k) == pytest.approx(alpha, abs=1e-6)
    assert acc.alpha_from_mean_accepted(float(k), k) == 1.0


# ---- properties -------------------------------------------------------------------------------


def ratio(num: int, den: int) -> float | None:
    """The correctly rounded ratio, computed apart from the module (exact, then rounded)."""
    return float(Fraction(num, den)) if den else None


@given(cycles)
def test_estimates_follow_their_definitions(cs):
    t = acc.tally(cs)
    accepted = sum(a for _, a in cs)
    proposed = sum(p for p, _ in cs)
    trials = sum(a + (a < p) for p, a in cs)
    proposing = sum(p > 0 for p, _ in cs)
    assert t.alpha_counted == ratio(accepted, trials)
    assert t.draft_acceptance_rate == ratio(accepted, proposed)
    assert t.mean_acceptance_length == (1 + ratio(accepted, proposing) if proposing else None)
    for i, share in enumerate(t.per_position(K_MAX), start=1):
        reached = [a >= i for p, a in cs if p >= i]
        assert share == ratio(sum(reached), len(reached))


@given(cycles)
def test_estimates_stay_in_range_and_the_rate_never_exceeds_alpha(cs):
    t = acc.tally(cs)
    if t.alpha_counted is not None:
        assert 0 <= t.draft_acceptance_rate <= t.alpha_counted <= 1
        assert 1 <= t.mean_acceptance_length <= 1 + K_MAX
    assert all(0 <= taken <= offered for taken, offered in zip(t.taken, t.offered, strict=True))
    assert list(t.offered) == sorted(t.offered, reverse=True)
    assert list(t.taken) == sorted(t.taken, reverse=True)


@given(cycles, cycles)
def test_tallies_pool_by_adding(first, second):
    assert acc.tally(first + second) == acc.tally(first) + acc.tally(second)
    assert acc.tally(second + first) == acc.tally(first + second)


@given(cycles, st.integers(1, 10))
def test_cycles_without_a_proposal_change_only_the_proposal_share(cs, empty):
    t, more = acc.tally(cs), acc.tally(cs + [(0, 0)] * empty)
    assert more.cycles == t.cycles + empty
    assert (more.alpha_counted, more.draft_acceptance_rate, more.mean_acceptance_length,
            more.per_position(K_MAX)) == (t.alpha_counted, t.draft_acceptance_rate,
                                           t.mean_acceptance_length, t.per_position(K_MAX))


@given(fixed_k_cycles())
def test_a_histogram_of_fixed_k_cycles_tallies_like_the_cycles(case):
    k, cs = case
    histogram = acc.acceptance_histogram(cs, k)
    assert sum(histogram) == len(cs)
    from_histogram = acc.tally_histogram(histogram)
    assert from_histogram == acc.tally(cs)
    assert from_histogram.per_position(k) == acc.tally(cs).per_position(k)


@given(fixed_k_cycles())
def test_vllm_counters_give_the_same_estimates_as_the_cycles(case):
    """vLLM's counters of the same fixed-k cycles: drafts, accepted tokens and per_pos[i],
    the drafts that accepted 0-based position i."""
    k, cs = case
    drafts, accepted = len(cs), sum(a for _, a in cs)
    per_pos = [sum(a > i for _, a in cs) for i in range(k)]
    acc.check_vllm_counts(drafts, accepted, per_pos)
    t = acc.tally(cs)
    assert acc.counted_alpha_vllm(accepted, drafts, per_pos) == t.alpha_counted
    assert acc.per_position_vllm(per_pos, drafts) == t.per_position(k)
    assert acc.histogram_vllm(drafts, per_pos) == acc.acceptance_histogram(cs, k)


def test_the_estimators_import_the_standard_library_and_the_analytic_layer_only():
    import ast
    import pathlib
    import sys

    tree = ast.parse(pathlib.Path(acc.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    outside = {m for m in imported
               if m.split(".")[0] not in sys.stdlib_module_names and m != "engine.analytic"}
    assert outside == set()
