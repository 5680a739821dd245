"""The slider model for prompt lookup: cycles with and without a proposal."""

from __future__ import annotations

import pytest

from engine.analytic import lookup, theory


def test_a_proposal_every_cycle_is_the_draft_model_formula():
    for alpha, k, c in [(0.7, 4, 0.18), (0.3, 2, 0.05), (1.0, 5, 0.0)]:
        assert lookup.speedup(alpha, k, 1.0, k * c, 1.3) == pytest.approx(
            theory.speedup(alpha, k, c, 1.3))


def test_no_proposals_is_plain_decoding_slowed_by_the_lookup():
    assert lookup.speedup(0.9, 4, 0.0, 0.0, 2.0) == 1.0
    assert lookup.speedup(0.9, 4, 0.0, 0.25, 2.0) == pytest.approx(1 / 1.25)


def test_the_issue_formula_worked_by_hand():
    # pi = 0.4, alpha = 0.8, k = 3: E(T | proposal) = 1 + .8 + .64 + .512 = 2.952
    tokens = 0.4 * 2.952 + 0.6
    cost = 0.4 * 1.5 + 0.6 + 0.01
    assert lookup.tokens_per_cycle(0.8, 3, 0.4) == pytest.approx(tokens)
    assert lookup.cycle_cost(0.4, 0.01, 1.5) == pytest.approx(cost)
    assert lookup.speedup(0.8, 3, 0.4, 0.01, 1.5) == pytest.approx(tokens / cost)


def test_short_proposals_yield_fewer_tokens():
    # half the proposals one token long, half three: (1.8 + 2.952) / 2
    assert lookup.expected_tokens_given_proposal(0.8, 3, [7, 5, 0, 5]) == pytest.approx(2.376)
    assert lookup.expected_tokens_given_proposal(0.8, 3) == pytest.approx(2.952)
    assert lookup.expected_tokens_given_proposal(0.8, 3, [4, 0, 0, 0]) == pytest.approx(2.952)


def test_best_k_carries_v_linearly_from_where_it_was_measured():
    assert lookup.verification_cost_at(4, 1.6, 4) == pytest.approx(1.6)
    assert lookup.verification_cost_at(8, 1.6, 4) == pytest.approx(2.2)
    assert lookup.verification_cost_at(0, 1.6, 4) == 1.0
    k, s = lookup.best_k(0.7, 0.5, 0.001, 1.6, 4)
    assert 1 <= k < theory.CURVE_MAX_K
    assert s == pytest.approx(lookup.speedup(0.7, k, 0.5, 0.001, 1 + 0.6 * k / 4))
    for other in range(1, theory.CURVE_MAX_K + 1):
        assert lookup.speedup(0.7, other, 0.5, 0.001, 1 + 0.6 * other / 4) <= s
    # free verification: the longest k wins
    assert lookup.best_k(0.7, 0.5, 0.001, 1.0, 4)[0] == theory.CURVE_MAX_K
