"""Reading the page state from a link: forgiving, and always saying what it changed."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import parse_qsl

import pytest

from app.params import DEFAULT_STATE, SLIDERS, HeldCosts, parse_page_state


def test_missing_values_take_defaults_silently():
    state, notices = parse_page_state([])
    assert state == DEFAULT_STATE
    assert notices == []


def test_valid_values_pass_unchanged():
    state, notices = parse_page_state(
        [("alpha", "0.42"), ("k", "7"), ("c", "0.3"), ("v", "1.5"), ("step_ms", "35"),
         ("tokens", "1000"), ("seed", "9")]
    )
    assert (state.alpha, state.k, state.c, state.v, state.step_ms, state.tokens, state.seed) == (
        0.42, 7, 0.3, 1.5, 35.0, 1000, 9)
    assert notices == []


def test_out_of_range_values_are_clamped_with_a_notice():
    state, notices = parse_page_state([("alpha", "1.7"), ("k", "0"), ("c", "-1")])
    assert (state.alpha, state.k, state.c) == (1.0, 1, 0.0)
    assert any("alpha=1.7" in n and "maximum 1" in n for n in notices)
    assert any("k=0" in n and "minimum 1" in n for n in notices)
    assert any("c=-1" in n for n in notices)


def test_malformed_values_fall_back_to_defaults_with_a_notice():
    state, notices = parse_page_state([("k", "abc"), ("alpha", "nan"), ("v", "")])
    assert (state.k, state.alpha, state.v) == (4, 0.7, 1.0)
    assert len(notices) == 2 and all("not a number" in n for n in notices)


def test_infinity_is_clamped():
    state, notices = parse_page_state([("v", "inf"), ("c", "-inf"), ("k", "1e999")])
    assert (state.v, state.c, state.k) == (3.0, 0.0, 16)
    assert len(notices) == 3


def test_repeated_keys_use_the_first_value():
    state, notices = parse_page_state([("k", "3"), ("k", "9")])
    assert state.k == 3
    assert notices == ["k was given 2 times; using the first value."]


def test_huge_strings_are_shortened_in_notices():
    state, notices = parse_page_state([("alpha", "9" * 100_000)])
    assert state.alpha == 1.0
    assert len(notices[0]) < 120


def test_fractional_k_is_rounded():
    state, notices = parse_page_state([("k", "3.6")])
    assert state.k == 4 and "whole number" in notices[0]


def test_query_round_trips():
    state, _ = parse_page_state([("alpha", "0.33"), ("k", "5"), ("seed", "12")])
    from urllib.parse import parse_qsl

    again, notices = parse_page_state(parse_qsl(state.query()))
    assert again == state and notices == []
    assert set(dict(parse_qsl(state.query()))) == set(SLIDERS)


def test_held_costs_travel_in_the_link_and_read_back():
    held = HeldCosts(tuple(1 + j / 7 for j in range(16)), 512, "1 × H100 SXM, bf16")
    state, notices = parse_page_state(parse_qsl(replace(DEFAULT_STATE, held=held).query()))
    assert notices == []
    assert state.held.batch == 512 and state.held.where == "1 × H100 SXM, bf16"
    assert state.held.v_by_k == pytest.approx(held.v_by_k, rel=1e-8)


@pytest.mark.parametrize(("vk", "problem"), [
    (",".join(["1"] * 15), "it has 15 values"),
    (",".join(["1"] * 15 + ["-2"]), "each value must be a number above 0"),
    (",".join(["1"] * 15 + ["nan"]), "each value must be a number above 0"),
])
def test_a_malformed_held_cost_list_is_dropped_with_a_notice(vk, problem):
    state, notices = parse_page_state([("vk", vk), ("v", "1.2")])
    assert state.held is None and state.v == 1.2
    assert len(notices) == 1 and problem in notices[0]


def test_the_draft_model_link_is_the_page_link_as_it_always_was():
    state, notices = parse_page_state([("preset", "model"), ("pi", "0.6")])
    assert state.drafter == "model" and notices == []
    assert "preset" not in state.query() and "pi" not in state.query()


def test_prompt_lookup_travels_in_the_link_with_its_pi():
    state, notices = parse_page_state([("preset", "ngram"), ("pi", "0.4"), ("c", "0")])
    assert (state.drafter, state.pi, state.c) == ("ngram", 0.4, 0.0) and notices == []
    again, _ = parse_page_state(parse_qsl(state.query()))
    assert again == state


def test_a_bad_drafter_or_pi_is_replaced_with_a_notice():
    state, notices = parse_page_state([("preset", "lookahead"), ("pi", "7")])
    assert (state.drafter, state.pi) == ("model", 1.0)
    assert any("preset='lookahead'" in n and "draft model" in n for n in notices)
    assert any("pi=7 is outside 0–1" in n for n in notices)


def test_page_figures_use_the_lookup_model_with_prompt_lookup():
    from app.params import page_figures
    from engine.analytic import lookup

    state, _ = parse_page_state([("preset", "ngram"), ("pi", "0.3"), ("alpha", "0.8")])
    fig = page_figures(state)
    assert fig.pi == 0.3
    assert fig.speedup == lookup.speedup(0.8, 4, 0.3, state.c, state.v)
    assert page_figures(DEFAULT_STATE).pi is None


def test_acceptance_by_position_is_read_kept_in_the_link_and_priced():
    from app.params import page_figures

    state, notices = parse_page_state([("positions", "0.8, 0.5,0.2"), ("shape", "pass"),
                                       ("c0", "0.1"), ("k", "2"), ("c", "0.05")])
    assert notices == [] and state.positions == (0.8, 0.5, 0.2)
    assert "positions=0.8%2C0.5%2C0.2" in state.query() and "shape=pass" in state.query()
    fig = page_figures(state)
    assert fig.expected_tokens == pytest.approx(2.3)
    assert fig.cycle_cost == pytest.approx(0.1 + 2 * 0.05 + state.v)
    again, _ = parse_page_state(parse_qsl(state.query()))
    assert again == state


@pytest.mark.parametrize(("query", "message"), [
    ([("positions", "0.5,0.7")], "cannot rise"),
    ([("positions", "lots")], "numbers separated by commas"),
    ([("positions", "0.5"), ("rates", "joint")], "survival or conditional"),
    ([("shape", "tree")], "sequential, pass"),
])
def test_rates_and_shapes_that_cannot_be_read_are_dropped_with_a_notice(query, message):
    state, notices = parse_page_state(query)
    assert any(message in n for n in notices), notices
    assert state.shape in ("sequential", "pass")
