"""Drafter kinds priced by the roofline: an EAGLE head and self-speculation with a bounded KV
cache, and MagicDec's finding that the latter pays more as the batch grows at long context."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.analytic import drafters, overheads, shapes
from engine.analytic.drafters import EAGLE_HEADS, HeadShape, eagle_draft_pass, self_spec_draft_pass
from engine.analytic.passes import Setting, forward_pass, target_pass
from engine.analytic.presets import HARDWARE, MODELS
from engine.analytic.theory import expected_tokens


def setting(target: str = "llama-3.1-8b", context: int = 32000, gpus: int = 8) -> Setting:
    m = shapes.model(target)
    return Setting(HARDWARE["a100-80gb"], m, m, gpus=gpus, context=context)


def test_an_eagle_head_counts_fc_one_layer_and_the_lm_head():
    head = HeadShape("h", "test", "llama-2-7b", hidden=8, intermediate=16, heads=2, kv_heads=1,
                     lm_head_vocab=100, fc_inputs=2, fc_bias=False)
    # fc 2*8*8; q 8*8, k and v 2*8*4, o 8*8; MLP 3*8*16; two norms 2*8; final norm 8; LM head
    assert head.params == 128 + 64 + 64 + 64 + 384 + 16 + 8 + 800
    assert head.shape().layers == 1


@pytest.mark.parametrize("key", sorted(set(EAGLE_HEADS) - {"shipped-eagle"}))
def test_the_eagle_presets_are_a_few_percent_of_their_targets(key):
    head = EAGLE_HEADS[key]
    target = shapes.model(head.target)
    assert head.hidden == target.width
    # one decoder layer of the target's width and more (its fc and LM head), far below 10 %
    assert 1 / target.layers < head.params / target.params < 0.08


def test_the_shipped_head_reads_more_than_the_shipped_draft():
    """The shipped pair's draft is so small that an EAGLE head, which pays the target's LM
    head and a layer of its width, reads more weights a step than the draft model: about a
    quarter of the target (2.03M multiply-adds a token against 7.86M; the draft's 0.74M)."""
    head, target = EAGLE_HEADS["shipped-eagle"], MODELS["shipped-target"]
    assert head.hidden == target.width
    assert 0.2 < head.params / target.params < 0.3
    assert head.params > MODELS["shipped-draft"].params


def test_an_eagle_heads_kv_cache_is_one_layer_of_the_target_width():
    head = EAGLE_HEADS["eagle3-llama-3.1-8b"]
    target = MODELS["llama-3.1-8b"]
    per_token = head.shape().kv_bytes_per_token("bf16")
    assert per_token * target.layers == target.kv_bytes_per_token("bf16")


def test_an_eagle_step_costs_a_small_share_of_a_target_step():
    s = setting(context=2048, gpus=1)
    head = EAGLE_HEADS["eagle3-llama-3.1-8b"]
    for batch in (1, 64):
        c = eagle_draft_pass(s, head, batch).seconds / target_pass(s, batch).seconds
        assert c < 0.1


def test_self_speculation_reads_the_targets_weights_and_a_bounded_kv_cache():
    short, long = setting(context=512), setting(context=100_000)
    assert self_spec_draft_pass(short, 64).bytes == target_pass(short, 64).bytes
    assert self_spec_draft_pass(long, 64).bytes == self_spec_draft_pass(setting(context=32000),
                                                                       64).bytes
    assert self_spec_draft_pass(long, 64).bytes < target_pass(long, 64).bytes / 10
    with pytest.raises(ValueError, match="at least one token"):
        self_spec_draft_pass(long, 64, budget=0)


def test_at_long_context_a_bounded_draft_gets_cheaper_against_the_target_as_the_batch_grows():
    s = setting(context=32000)
    ratios = [self_spec_draft_pass(s, b).seconds / target_pass(s, b).seconds
              for b in (8, 32, 128)]
    assert ratios == sorted(ratios, reverse=True)


def test_magicdecs_finding_a_bounded_draft_pays_more_as_the_batch_grows():
    s, k, alpha = setting(context=32000), 3, 0.81

    def gain(batch: int, bounded: bool) -> float:
        draft = (self_spec_draft_pass(s, batch) if bounded
                 else forward_pass(s.target, s, batch, 1)).seconds
        return overheads.speedup(expected_tokens(alpha, k), draft,
                                 target_pass(s, batch, k + 1).seconds,
                                 target_pass(s, batch).seconds, k, overheads.NONE, batch,
                                 s.target.layers, s.target.layers)

    bounded = [gain(b, True) for b in (8, 32, 128)]
    assert bounded == sorted(bounded) and bounded[-1] > 1
    # the same target drafting with its full KV cache never pays: every step costs a step
    assert all(gain(b, False) < 1 for b in (8, 32, 128))


def test_self_speculation_runs_on_the_targets_gpus():
    s = setting(context=32000, gpus=8)
    assert self_spec_draft_pass(s, 32).bytes < self_spec_draft_pass(replace(s, gpus=1), 32).bytes
    assert drafters.STREAMING_BUDGET == 512


def test_each_head_names_the_checkpoint_and_method_vllm_loads_it_by():
    assert {k: (h.checkpoint, h.method) for k, h in EAGLE_HEADS.items()} == {
        "shipped-eagle": ("models/eagle", "eagle"),
        "eagle-llama2-chat-7b": ("yuhuili/EAGLE-llama2-chat-7B", "eagle"),
        "eagle3-llama-3.1-8b": ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "eagle3"),
        "eagle3-llama-3.3-70b": ("yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", "eagle3"),
    }
    # EAGLE-3 fuses three layers' features, and its preset is the one with fc_inputs 3
    assert [h.method == "eagle3" for h in EAGLE_HEADS.values()] == [
        h.fc_inputs == 3 for h in EAGLE_HEADS.values()]


def test_a_self_speculation_cycle_is_k_bounded_drafts_and_one_verification():
    s = setting(context=32000)
    for batch, k in ((1, 1), (64, 3)):
        step = target_pass(s, batch).seconds
        expected = (k * self_spec_draft_pass(s, batch).seconds
                    + target_pass(s, batch, k + 1).seconds) / step
        assert drafters.self_spec_cycle(s, batch, k) == pytest.approx(expected)
    assert drafters.self_spec_cycle(s, 64, 3, budget=32000) > drafters.self_spec_cycle(s, 64, 3)


def test_self_speculation_holds_the_targets_weights_once_and_two_caches_a_sequence():
    s = setting(context=32000)
    weights, per_sequence = drafters.self_spec_bytes(s, 512)
    kv = s.target.kv_bytes_per_token(s.dtype, s.gpus)
    assert weights == s.target.params * 2 / s.gpus
    assert per_sequence == (32000 + s.k + 1 + 512) * kv
    # a budget longer than the context is the context
    short = replace(s, context=100)
    assert drafters.self_spec_bytes(short, 512)[1] == (100 + s.k + 1 + 100) * kv


# ---- Medusa heads: one pass drafts k ---------------------------------------------------------


def test_a_medusa_head_reads_a_block_and_an_lm_head():
    heads = drafters.MedusaShape("m", "test", "x", hidden=8, vocab=100, num_heads=3)
    assert heads.head_params() == (8 * 8 + 8) + 100 * 8
    assert heads.resident_params() == 3 * (8 * 8 + 8) + 3 * 100 * 8
    shared = replace(heads, own_lm_heads=False)
    assert shared.resident_params() == 3 * (8 * 8 + 8) + 100 * 8
    assert shared.head_params() == heads.head_params()  # vLLM applies it head by head


def test_a_medusa_head_of_a_llama_8b_costs_a_few_percent_of_its_step():
    """The issue's figure: a Medusa-1 head with its own LM head is about 6.5% of a Llama 3 8B
    step (a 128,256 x 4,096 LM head and a 4,096-wide block against 8B weights)."""
    target = MODELS["llama-3.1-8b"]
    heads = drafters.medusa_heads_of(target)
    assert heads.num_heads == 5 and heads.own_lm_heads and heads.vocab == 128256
    assert heads.head_params() / target.params == pytest.approx(0.065, abs=0.005)


def test_the_shipped_target_gets_the_heads_trained_for_it():
    heads = drafters.medusa_heads_of(MODELS["shipped-target"])
    assert heads.checkpoint == "models/medusa" and heads.num_heads == 4
    assert not heads.own_lm_heads


def test_a_medusa_cycle_pays_the_proposers_fixed_time_once_not_once_a_token():
    """k heads in one pass: each more head adds its own bytes and FLOPs only, while a chain
    drafter pays its launch and fixed time again for every token."""
    m = MODELS["llama-3.1-8b"]
    s = Setting(HARDWARE["h100-sxm"], m, m, gpus=1, context=512)
    s = replace(s, overheads=replace(s.overheads, draft_fixed_s=200e-6, launch_s_per_layer=0.0))
    heads = drafters.medusa_heads_of(m)
    step = overheads.plain_step_s(target_pass(s, 1).seconds, s.overheads, 1, m.layers)
    for k in range(1, heads.num_heads + 1):
        expected = overheads.cycle_s(drafters.medusa_pass(s, heads, 1, k).seconds,
                                     target_pass(s, 1, k + 1).seconds, 1, s.overheads, 1,
                                     k, m.layers) / step
        assert drafters.medusa_cycle(s, heads, 1, k) == pytest.approx(expected)
    for k in range(1, heads.num_heads):  # one more head: its pass and one more verified
        grow = drafters.medusa_cycle(s, heads, 1, k + 1) - drafters.medusa_cycle(s, heads, 1, k)
        passes = (drafters.medusa_pass(s, heads, 1, k + 1).seconds
                  - drafters.medusa_pass(s, heads, 1, k).seconds
                  + target_pass(s, 1, k + 2).seconds - target_pass(s, 1, k + 1).seconds)
        assert grow == pytest.approx(passes / step)  # and never the 200 us again
    with pytest.raises(ValueError, match="at most 5"):
        drafters.medusa_cycle(s, heads, 1, 6)
