"""The live panel's state in the link: forgiving like the sliders, limited by the settings."""

from __future__ import annotations

from app.live import DEFAULT_PROMPT, parse_live_state
from engine.settings import PairSpec, Settings

SETTINGS = Settings(load_models=False, max_new_tokens_limit=100, max_prompt_chars=100)


def test_defaults():
    live, notices = parse_live_state([], SETTINGS)
    assert live.prompt == DEFAULT_PROMPT and live.pair == "shipped" and notices == []
    assert (live.run_k, live.temperature, live.top_p, live.max_new_tokens) == (4, 0.8, 1.0, 64)


def test_values_are_read_and_clamped_to_the_settings():
    live, notices = parse_live_state(
        [("prompt", "hello"), ("run_k", "40"), ("max_new_tokens", "1000"), ("top_p", "0")],
        SETTINGS)
    assert live.prompt == "hello" and live.run_k == 16 and live.max_new_tokens == 100
    assert live.top_p == 0.01
    assert len(notices) == 3


def test_long_prompts_are_cut_and_unknown_pairs_replaced():
    live, notices = parse_live_state([("prompt", "x" * 150), ("pair", "/etc/passwd")], SETTINGS)
    assert live.prompt == "x" * 100 and live.pair == "shipped"
    assert any("cut to 100" in n for n in notices) and any("not offered" in n for n in notices)


MEDUSA = Settings(pairs={"shipped": PairSpec(target="models/target", medusa="models/medusa")},
                  default_pair="shipped", load_models=False)


def test_a_tree_in_a_link_is_kept_for_the_medusa_heads_and_written_back_canonical():
    live, notices = parse_live_state([("drafter", "medusa"), ("run_tree", " 0;1; 0.0 ;0")],
                                     MEDUSA)
    assert notices == [] and live.run_tree == "0;1;0.0"
    assert "run_tree=0%3B1%3B0.0" in live.query()
    assert "run_tree" not in parse_live_state([], MEDUSA)[0].query()  # a chain: not in the link


def test_a_tree_the_link_cannot_use_is_dropped_with_a_notice():
    for query, says in (([("run_tree", "0;1")], "drafted by the draft model or the Medusa heads"),
                        ([("drafter", "medusa"), ("run_tree", "0.1")], "elder siblings")):
        live, notices = parse_live_state(query, MEDUSA)
        assert live.run_tree == "" and len(notices) == 1 and says in notices[0]
