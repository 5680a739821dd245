"""Acceptance by position: survival and conditional rates, tokens a cycle, the cost shapes and
the best k, against the i.i.d. model where they must agree and a published curve where they
must not."""

from __future__ import annotations

import pytest

from engine.analytic import theory
from engine.analytic.positions import (
    CONDITIONAL,
    ONE_PASS,
    Curve,
    CurveError,
    best_k,
    conditional_from_survival,
    draft_cost,
    iid,
    speedup,
    survival_from_conditional,
    tokens_per_cycle,
)

# A multi-token-prediction drafter on vLLM, k = 4 (issue "Parallel drafting and acceptance by
# position"): survival rates by position.
MTP_K4 = [0.844, 0.599, 0.385, 0.271]


def test_survival_and_conditional_rates_convert_both_ways():
    conditional = conditional_from_survival(MTP_K4)
    assert conditional == pytest.approx([0.844, 0.599 / 0.844, 0.385 / 0.599, 0.271 / 0.385])
    assert survival_from_conditional(conditional) == pytest.approx(MTP_K4)
    assert Curve.of(conditional, CONDITIONAL).survival == pytest.approx(tuple(MTP_K4))


def test_tokens_a_cycle_are_one_plus_the_survival_rates():
    assert tokens_per_cycle(Curve.of(MTP_K4), 4) == pytest.approx(1 + sum(MTP_K4))
    assert tokens_per_cycle(Curve.of(MTP_K4), 2) == pytest.approx(1 + 0.844 + 0.599)


@pytest.mark.parametrize("alpha", [0.3, 0.7, 0.95])
def test_the_iid_curve_gives_the_iid_model_exactly(alpha):
    curve = Curve.of(iid(alpha, 6))
    for k in range(1, 10):  # past 6 the last conditional rate, alpha, holds
        assert speedup(curve, k, 0.1, 1.0) == pytest.approx(theory.speedup(alpha, k, 0.1, 1.0))
    assert best_k(curve, 0.1, k_max=12) == pytest.approx(theory.best_k(alpha, 0.1, k_max=12))
    assert curve.alpha_iid() == pytest.approx(alpha, abs=1e-9)


def test_past_the_measured_positions_the_last_conditional_rate_holds():
    curve = Curve.of([0.8, 0.4])
    assert curve.extended(4) == pytest.approx([0.8, 0.4, 0.2, 0.1])


def test_a_falling_curve_picks_a_shorter_k_than_its_iid_equivalent():
    """The same tokens a cycle at k = 4, but front-loaded: the curve stops paying sooner."""
    curve = Curve.of(MTP_K4)
    alpha = curve.alpha_iid()
    assert 1 + sum(iid(alpha, 4)) == pytest.approx(1 + sum(MTP_K4))
    k_curve, _ = best_k(curve, 0.15)
    k_iid, _ = theory.best_k(alpha, 0.15)
    assert k_curve < k_iid


def test_one_pass_pays_its_fixed_part_once():
    assert draft_cost(4, 0.05) == pytest.approx(0.2)
    assert draft_cost(4, 0.05, ONE_PASS, c0=0.1) == pytest.approx(0.3)
    assert draft_cost(0, 0.05, ONE_PASS, c0=0.1) == 0.0
    # a fixed part favours drafting more once it is paid
    curve = Curve.of(iid(0.8, 8))
    assert best_k(curve, 0.05, shape=ONE_PASS, c0=0.3)[0] >= best_k(curve, 0.05)[0]


@pytest.mark.parametrize(("rates", "kind", "message"), [
    ([0.5, 0.6], "survival", "cannot rise"),
    ([1.2], "survival", "a rate is 0..1"),
    ([], "survival", "give 1 to 16"),
    ([0.5], "joint", "survival or conditional"),
])
def test_rates_that_are_no_curve_are_refused_with_the_reason(rates, kind, message):
    with pytest.raises(CurveError, match=message):
        Curve.of(rates, kind)


def test_the_slider_figures_on_the_iid_curve_are_the_iid_figures():
    from engine.analytic.positions import figures

    ours, theirs = figures(None, 0.7, 4, 0.1, 1.2), theory.figures(0.7, 4, 0.1, 1.2)
    for name in ("expected_tokens", "cycle_cost", "speedup", "best_k", "best_speedup"):
        assert getattr(ours, name) == pytest.approx(getattr(theirs, name)), name
    assert [p.speedup for p in ours.iid_curve] == pytest.approx([p.speedup for p in theirs.curve])


def test_the_slider_figures_price_the_curve_and_draw_the_iid_curve_beside_it():
    from engine.analytic.positions import figures

    fig = figures(Curve.of(MTP_K4), 0.6, 2, 0.05, 1.0, shape=ONE_PASS, c0=0.1)
    assert fig.expected_tokens == pytest.approx(1 + 0.844 + 0.599)
    assert fig.cycle_cost == pytest.approx(0.1 + 2 * 0.05 + 1.0)
    assert fig.survival == pytest.approx([0.844, 0.599])
    assert fig.iid_curve[1].expected_tokens == pytest.approx(1 + 0.6 + 0.36)


def test_simulated_cycles_accept_position_i_at_the_survival_rate():
    from engine.analytic.positions import accepted_sd, simulate_cycles

    curve = Curve.of(MTP_K4)
    cycles = simulate_cycles(curve, 4, 20_000, seed=1)
    for i, s in enumerate(MTP_K4):
        share = sum(c[i] == "accepted" for c in cycles) / len(cycles)
        assert share == pytest.approx(s, abs=0.015), i
    accepted = [c.count("accepted") for c in cycles]
    mean = sum(accepted) / len(accepted)
    sd = (sum((a - mean) ** 2 for a in accepted) / len(accepted)) ** 0.5
    assert sd == pytest.approx(accepted_sd(curve, 4), rel=0.03)
    assert accepted_sd(Curve.of(iid(0.7, 4)), 4) == pytest.approx(theory.accepted_sd(0.7, 4))
