"""The departure of counted cycles from independent acceptance: tokens per cycle from the
histogram, and the chi-square against the truncated geometric."""

from __future__ import annotations

import math
import random

import pytest

from engine.analytic import acceptance, theory
from engine.analytic.geometric import (
    chi2_survival,
    geometric_fit,
    length_shares,
    tokens_per_cycle,
)


@pytest.mark.parametrize(("x", "df", "p"), [
    (3.841459, 1, 0.05), (7.814728, 3, 0.05), (18.307038, 10, 0.05), (6.634897, 1, 0.01),
    (0.5, 4, 0.973479), (30.0, 3, 1.3800e-6),
])
def test_chi2_survival_matches_published_tables(x, df, p):
    assert chi2_survival(x, df) == pytest.approx(p, rel=1e-4)


@pytest.mark.parametrize("x", [0.1, 1.0, 4.0, 25.0])
def test_with_two_degrees_of_freedom_the_survival_is_exp_of_minus_half_x(x):
    assert chi2_survival(x, 2) == pytest.approx(math.exp(-x / 2), rel=1e-12)


def test_tokens_per_cycle_counts_the_bonus_token_and_plain_cycles():
    assert tokens_per_cycle([1, 0, 1]) == (1 + 3) / 2
    assert tokens_per_cycle([1, 0, 1], without_proposal=2) == (1 + 3 + 2) / 4
    assert tokens_per_cycle([0, 0, 0]) is None


def test_at_the_models_own_shares_tokens_per_cycle_is_e_of_t():
    pmf = theory.acceptance_length_pmf(0.7, 5)
    assert tokens_per_cycle([p * 1e6 for p in pmf]) == pytest.approx(
        theory.expected_tokens(0.7, 5))


def test_length_shares_mix_the_pmf_of_each_proposal_length():
    shares = length_shares(0.6, [9, 1, 0, 3])  # the 9 cycles without a proposal are left out
    one, three = theory.acceptance_length_pmf(0.6, 1), theory.acceptance_length_pmf(0.6, 3)
    assert shares == pytest.approx([(one[0] + 3 * three[0]) / 4, (one[1] + 3 * three[1]) / 4,
                                    three[2] * 3 / 4, three[3] * 3 / 4])
    assert sum(shares) == pytest.approx(1.0)
    assert length_shares(0.6, [5, 0, 0]) == [0.0, 0.0, 0.0]


def test_all_or_nothing_cycles_are_far_from_geometric():
    """A greedy run as the issue saw it: 45% of cycles accepted none of 4, 50% all 4."""
    histogram = [45, 2, 2, 1, 50]
    cycles = [(4, a) for a, n in enumerate(histogram) for _ in range(n)]
    alpha = acceptance.tally(cycles).alpha_counted
    fit = geometric_fit(cycles, alpha)
    assert fit.df == 3 and fit.cycles == 100
    assert fit.p_value < 1e-6
    # and the histogram gives fewer tokens a cycle than independence at the same alpha
    assert tokens_per_cycle(histogram) < theory.expected_tokens(alpha, 4)


def test_independent_cycles_fit_the_geometric():
    rng = random.Random(7)
    alpha, k = 0.7, 4
    cycles = []
    for _ in range(2000):
        accepted = 0
        while accepted < k and rng.random() < alpha:
            accepted += 1
        cycles.append((k, accepted))
    fit = geometric_fit(cycles, acceptance.tally(cycles).alpha_counted)
    assert fit.df == k - 1 and fit.p_value > 0.01
    assert fit.smallest_expected > 5


def test_expected_counts_give_a_chi_square_of_zero():
    pmf = theory.acceptance_length_pmf(0.5, 2)  # 0.5, 0.25, 0.25
    cycles = [(2, 0)] * 200 + [(2, 1)] * 100 + [(2, 2)] * 100
    fit = geometric_fit(cycles, 0.5)
    assert [fit.chi2, fit.df, fit.p_value] == [0.0, 1, 1.0]
    assert fit.smallest_expected == 400 * min(pmf)


def test_mixed_lengths_have_one_df_per_free_share_less_alpha():
    cycles = [(0, 0)] * 10 + [(2, 1), (2, 0), (3, 3), (3, 0), (3, 1)]
    assert geometric_fit(cycles, 0.5).df == 2 + 3 - 1
    assert geometric_fit(cycles, 0.5).cycles == 5  # the cycles without a proposal hold none


def test_nothing_to_test_is_none():
    assert geometric_fit([(4, 1)], None) is None
    assert geometric_fit([(1, 0), (1, 1)], 0.5) is None  # one-token proposals: df 0
    assert geometric_fit([(0, 0)], 0.5) is None


def test_a_count_the_model_calls_impossible_is_no_fit():
    assert geometric_fit([(2, 2), (2, 0)], 1.0).p_value == 0.0
