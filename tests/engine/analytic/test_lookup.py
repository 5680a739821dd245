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


def test_the_page_figures_follow_the_lookup_formula_at_every_k():
    fig = lookup.figures(0.8, 3, 0.4, 0.01, 1.5, step_ms=20.0, tokens=100)
    assert fig.pi == 0.4
    assert fig.speedup == pytest.approx(lookup.speedup(0.8, 3, 0.4, 0.01, 1.5))
    assert fig.expected_tokens == pytest.approx(0.4 * 2.952 + 0.6)
    assert fig.expected_accepted == pytest.approx(0.4 * 1.952)
    assert fig.cycle_cost == pytest.approx(0.4 * 1.5 + 0.6 + 0.01)
    assert fig.spec_tok_s == pytest.approx(50.0 * fig.speedup)
    assert [p.speedup for p in fig.curve] == pytest.approx(
        [lookup.speedup(0.8, j, 0.4, 0.01, 1.5) for j in range(1, theory.CURVE_MAX_K + 1)])
    assert (fig.best_k, fig.best_speedup) == max(
        ((p.k, p.speedup) for p in fig.curve), key=lambda kv: (kv[1], -kv[0]))


def test_with_one_v_for_every_k_a_longer_proposal_never_costs_more():
    # c is paid per cycle, not per proposed token: only a v that grows with k stops k.
    assert lookup.figures(0.8, 3, 0.4, 0.0, 1.2).best_k == theory.CURVE_MAX_K
    growing = tuple(1.0 + 0.1 * j for j in range(1, theory.CURVE_MAX_K + 1))
    fig = lookup.figures(0.8, 3, 0.4, 0.0, 1.2, v_by_k=growing)
    assert fig.v == pytest.approx(1.3)
    assert 1 < fig.best_k < theory.CURVE_MAX_K
    assert fig.best_speedup == pytest.approx(max(
        lookup.speedup(0.8, j, 0.4, 0.0, growing[j - 1]) for j in range(1, 17)))


def test_no_proposal_at_all_is_never_worth_it():
    fig = lookup.figures(0.9, 4, 0.0, 0.01, 1.0)
    assert not fig.worth_speculating and fig.best_k == 1
    assert fig.expected_accepted == 0.0


def test_simulated_cycles_without_a_proposal_are_the_target_token_alone():
    cycles = lookup.simulate_cycles(0.7, 4, 0.3, 4000, seed=5)
    assert cycles == lookup.simulate_cycles(0.7, 4, 0.3, 4000, seed=5)
    alone = sum(c == [theory.TARGET] for c in cycles) / len(cycles)
    assert alone == pytest.approx(0.7, abs=0.03)
    proposed = [c for c in cycles if len(c) > 1]
    assert all(len(c) == 5 and c[-1] == theory.TARGET for c in proposed)
    accepted = [c.count(theory.ACCEPTED) for c in cycles]
    mean = sum(accepted) / len(accepted)
    sd = (sum((a - mean) ** 2 for a in accepted) / len(accepted)) ** 0.5
    assert mean == pytest.approx(0.3 * theory.expected_accepted(0.7, 4), rel=0.06)
    assert sd == pytest.approx(lookup.accepted_sd(0.7, 4, 0.3), rel=0.06)
    assert lookup.accepted_sd(0.7, 4, 1.0) == pytest.approx(theory.accepted_sd(0.7, 4))


def test_the_command_lines_prompt_lookup_defaults_are_the_drafters():
    """The command line reads vLLM's n-gram defaults from here (no torch); the drafter keeps
    its own copy: they must agree."""
    from engine.analytic.lookup import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN
    from engine.decoder import ngram

    assert (PROMPT_LOOKUP_MIN, PROMPT_LOOKUP_MAX) == (ngram.PROMPT_LOOKUP_MIN,
                                                      ngram.PROMPT_LOOKUP_MAX) == (2, 4)
    assert ngram.PROMPT_LOOKUP_MIN is PROMPT_LOOKUP_MIN  # one constant, one home
