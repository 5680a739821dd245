"""Mixtures of experts on the roofline: a pass reads the experts its tokens reach, so verifying
k + 1 tokens a row reads more of them than one token does, most of all at a small batch; the
presets' sizes are their model cards' (config.json values, engine/analytic/presets.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.analytic.break_even import costs
from engine.analytic.passes import Setting, forward_pass
from engine.analytic.presets import HARDWARE, MODELS, PAIRS

MOE = MODELS["qwen3-30b-a3b"]
DENSE = MODELS["llama-3.1-8b"]


@pytest.mark.parametrize("key, total, active", [
    ("qwen3-30b-a3b", 30.5e9, 3.3e9),  # Qwen3's model cards: "30.5B total, 3.3B activated"
    ("qwen3-235b-a22b", 235e9, 22e9),  # "235B total, 22B activated"
    ("mixtral-8x7b", 46.7e9, 12.9e9),  # Mixtral's paper: 46.7B total, 12.9B active
])
def test_the_presets_have_their_model_cards_sizes(key, total, active):
    m = MODELS[key]
    assert m.params == pytest.approx(total, rel=0.01)
    # the card's active count includes the input embedding table a token reads one row of
    assert m.active_params + m.input_table == pytest.approx(active, rel=0.03)


def test_the_share_of_experts_touched_grows_with_the_tokens_to_all_of_them():
    k_over_n = MOE.experts_per_token / MOE.experts
    assert MOE.experts_touched(1) == pytest.approx(k_over_n)
    shares = [MOE.experts_touched(t) for t in (1, 2, 5, 16, 64, 512)]
    assert shares == sorted(shares) and shares[-1] > 0.999
    assert MOE.experts_touched(5) == pytest.approx(1 - (1 - k_over_n) ** 5)
    assert DENSE.experts_touched(1) == 1.0 and DENSE.read_params(1) == DENSE.streamed_params


def test_verifying_k_plus_1_tokens_reads_more_experts_than_one_token_most_at_small_batch():
    s = Setting(HARDWARE["h100-sxm"], MOE, MOE, context=0)
    ratio = {b: forward_pass(MOE, s, b, 5).bytes / forward_pass(MOE, s, b, 1).bytes
             for b in (1, 8, 64)}
    assert ratio[1] > 2.5 > ratio[8] > ratio[64] > 1.0  # 5 tokens reach ~4x the experts
    d = replace(s, target=DENSE, draft=DENSE)
    assert forward_pass(DENSE, d, 1, 5).bytes == pytest.approx(
        forward_pass(DENSE, d, 1, 1).bytes, rel=1e-3)  # a dense pass reads its weights once


def test_a_moe_targets_verification_costs_several_plain_steps_where_a_dense_ones_costs_one():
    pair = PAIRS["qwen3-30b-a3b-0.6b"]
    s = Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, context=512, k=4)
    dense = Setting(HARDWARE["h100-sxm"], DENSE, MODELS["llama-3.2-1b"], context=512, k=4)
    v_moe, v_dense = costs(s, 1)[1], costs(dense, 1)[1]
    assert v_dense == pytest.approx(1.0, abs=0.02) and v_moe > 2.0
    # at a large batch every expert is read anyway: v falls back towards the dense shape
    assert costs(s, 256)[1] < v_moe


def test_a_token_multiplies_by_its_top_k_experts_only():
    s = Setting(HARDWARE["h100-sxm"], MOE, MOE, context=0)
    assert forward_pass(MOE, s, 1, 1).flops == pytest.approx(2 * MOE.active_params)
