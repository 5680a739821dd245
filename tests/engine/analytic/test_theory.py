"""The analytic model: every formula of docs/design.md, checked against enumeration, simulation
and the reference case."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from engine.analytic import theory

ALPHAS = [0.0, 0.05, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0]
KS = [1, 2, 3, 4, 7, 16]


def enumerate_cycles(alpha: float, k: int):
    """Every outcome of k Bernoulli(alpha) draft checks, with its probability and the
    number of draft tokens accepted (the prefix of successes)."""
    for outcome in itertools.product([True, False], repeat=k):
        prob = math.prod(alpha if ok else 1 - alpha for ok in outcome)
        accepted = next((i for i, ok in enumerate(outcome) if not ok), k)
        yield prob, accepted


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("k", [1, 2, 3, 4, 7])
def test_expected_tokens_match_brute_force_enumeration(alpha, k):
    mean_accepted = sum(p * a for p, a in enumerate_cycles(alpha, k))
    assert theory.expected_accepted(alpha, k) == pytest.approx(mean_accepted, abs=1e-12)
    assert theory.expected_tokens(alpha, k) == pytest.approx(mean_accepted + 1, abs=1e-12)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_acceptance_length_pmf_matches_enumeration(alpha, k):
    pmf = [0.0] * (k + 1)
    for p, a in enumerate_cycles(alpha, k):
        pmf[a] += p
    assert theory.acceptance_length_pmf(alpha, k) == pytest.approx(pmf, abs=1e-12)
    assert sum(theory.acceptance_length_pmf(alpha, k)) == pytest.approx(1.0)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_accepted_sd_matches_enumeration(alpha, k):
    mean = sum(p * a for p, a in enumerate_cycles(alpha, k))
    variance = sum(p * (a - mean) ** 2 for p, a in enumerate_cycles(alpha, k))
    assert theory.accepted_sd(alpha, k) == pytest.approx(variance**0.5, abs=1e-9)


@pytest.mark.parametrize("alpha", [a for a in ALPHAS if a < 1])
@pytest.mark.parametrize("k", KS)
def test_closed_forms_of_design_md(alpha, k):
    assert theory.expected_tokens(alpha, k) == pytest.approx((1 - alpha ** (k + 1)) / (1 - alpha))
    assert theory.expected_accepted(alpha, k) == pytest.approx(alpha * (1 - alpha**k) / (1 - alpha))
    # Never above the 1 / (1 - alpha) ceiling that circulating tables sometimes exceed.
    assert theory.expected_tokens(alpha, k) <= 1 / (1 - alpha) + 1e-12


@pytest.mark.parametrize("alpha,k", [(0.3, 4), (0.7, 4), (0.9, 8)])
def test_simulator_agrees_with_formulas(alpha, k):
    cycles = theory.simulate_cycles(alpha, k, n_cycles=20_000, seed=7)
    accepted = [c.count(theory.ACCEPTED) for c in cycles]
    mean = sum(accepted) / len(accepted)
    sd = math.sqrt(sum((a - mean) ** 2 for a in accepted) / len(accepted))
    # Five standard errors: fails for a wrong formula, essentially never by chance.
    assert abs(mean - theory.expected_accepted(alpha, k)) < 5 * sd / math.sqrt(len(accepted))
    for i, p_i in enumerate(theory.position_acceptance(alpha, k)):
        share = sum(1 for a in accepted if a > i) / len(accepted)
        assert abs(share - p_i) < 5 * math.sqrt(p_i * (1 - p_i) / len(accepted)) + 1e-9


def test_simulated_cycle_shape():
    for cycle in theory.simulate_cycles(0.6, 5, n_cycles=500, seed=3):
        assert len(cycle) == 6 or theory.REJECTED in cycle
        assert cycle[-1] == theory.TARGET and cycle.count(theory.TARGET) == 1
        assert cycle.count(theory.REJECTED) <= 1
        drafts = cycle[:-1]
        assert len(drafts) == 5
        if theory.REJECTED in drafts:
            r = drafts.index(theory.REJECTED)
            assert drafts[:r] == [theory.ACCEPTED] * r
            assert drafts[r + 1 :] == [theory.DISCARDED] * (4 - r)
        else:
            assert drafts == [theory.ACCEPTED] * 5


def test_simulator_is_seeded():
    assert theory.simulate_cycles(0.5, 4, 12, seed=1) == theory.simulate_cycles(0.5, 4, 12, seed=1)
    assert theory.simulate_cycles(0.5, 4, 12, seed=1) != theory.simulate_cycles(0.5, 4, 12, seed=2)


def test_reference_case_digit_for_digit():
    fig = theory.figures(alpha=0.70, k=4, c=0.18, v=1.0, step_ms=22, tokens=500)
    assert f"{fig.expected_accepted:.2f}" == "1.77"
    assert f"{fig.expected_tokens:.2f}" == "2.77"
    assert f"{fig.cycle_cost:.2f}" == "1.72"
    assert f"{fig.speedup:.3f}" == "1.612"
    assert f"{fig.baseline_tok_s:.1f}" == "45.5"
    assert f"{fig.spec_tok_s:.1f}" == "73.3"
    assert f"{fig.baseline_s:.1f}" == "11.0"
    assert f"{fig.spec_s * 1000:.0f}" == "6823"
    assert fig.best_k == 3
    assert f"{fig.best_speedup:.2f}" == "1.64"


def test_edge_alpha_zero_yields_only_the_target_token():
    for k in KS:
        assert theory.expected_tokens(0.0, k) == 1.0
        assert theory.acceptance_length_pmf(0.0, k)[0] == 1.0
    assert theory.best_k(0.0, c=0.1) == (1, pytest.approx(1 / 1.1))
    assert not theory.figures(0.0, 4, 0.1).worth_speculating


def test_edge_alpha_one_accepts_every_draft():
    for k in KS:
        assert theory.expected_tokens(1.0, k) == k + 1
        assert theory.acceptance_length_pmf(1.0, k)[-1] == 1.0


def test_edge_k_one():
    assert theory.expected_tokens(0.6, 1) == pytest.approx(1.6)
    assert theory.cycle_cost(1, 0.2, 1.0) == pytest.approx(1.2)
    assert theory.acceptance_length_pmf(0.6, 1) == pytest.approx([0.4, 0.6])


def test_edge_free_draft_makes_longer_drafts_never_worse():
    speedups = [theory.speedup(0.8, k, c=0.0) for k in range(1, 17)]
    assert speedups == sorted(speedups)
    assert theory.best_k(0.8, c=0.0) == (16, pytest.approx(speedups[-1]))


def test_best_k_ties_go_to_the_smaller_k():
    # alpha = 0, c = 0: every k gives exactly 1 / v.
    assert theory.best_k(0.0, c=0.0) == (1, 1.0)


def test_best_k_is_the_argmax_of_the_curve():
    rng = random.Random(0)
    for _ in range(200):
        alpha, c, v = rng.random(), rng.random(), rng.uniform(0.5, 3)
        k_best, s_best = theory.best_k(alpha, c, v)
        curve = [theory.speedup(alpha, k, c, v) for k in range(1, 17)]
        assert s_best == max(curve)
        assert k_best == curve.index(max(curve)) + 1


def test_verification_cost_enters_the_cycle_cost():
    assert theory.cycle_cost(4, 0.18, v=1.5) == pytest.approx(2.22)
    assert theory.speedup(0.7, 4, 0.18, v=2.0) < theory.speedup(0.7, 4, 0.18, v=1.0)


def test_rates_and_times():
    assert theory.baseline_tok_s(20) == 50.0
    assert theory.time_for_tokens_s(500, 20) == 10.0
    assert theory.time_for_tokens_s(500, 20, speedup_factor=2.0) == 5.0


def test_theory_imports_nothing_heavy():
    import ast
    import pathlib

    source = pathlib.Path(theory.__file__).read_text()
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module)])
    }
    assert imported <= {"__future__", "random", "dataclasses", "math"}


def test_a_verification_cost_for_every_k_prices_each_k_of_the_curve_and_the_best_k():
    v_by_k = tuple(1.0 + 0.3 * (j - 1) for j in range(1, 17))  # v grows with k, as at a batch
    fig = theory.figures(alpha=0.8, k=3, c=0.05, v=1.0, v_by_k=v_by_k)
    assert fig.v == v_by_k[2]
    assert fig.speedup == theory.speedup(0.8, 3, 0.05, v_by_k[2])
    assert [p.speedup for p in fig.curve] == [theory.speedup(0.8, j, 0.05, v_by_k[j - 1])
                                              for j in range(1, 17)]
    best = max(range(1, 17), key=lambda j: (fig.curve[j - 1].speedup, -j))
    assert (fig.best_k, fig.best_speedup) == (best, fig.curve[best - 1].speedup)
    assert fig.best_k < theory.figures(alpha=0.8, k=3, c=0.05, v=1.0).best_k
