"""The drafter a plan prices: the pair's draft model, an EAGLE head in the draft's place, or
the target drafting for itself over a bounded KV cache."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.analytic import drafters as analytic
from engine.analytic.drafters import EAGLE_HEADS
from engine.analytic.memory import max_batch_that_fits
from engine.analytic.passes import Setting, target_pass
from engine.analytic.presets import ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS, HARDWARE, PAIRS
from engine.analytic.timed_costs import PlanError
from engine.planner.costs import roofline_cycle, setting_costs
from engine.planner.drafters import drafter_costs, eagle_head
from engine.planner.vllm_config import SELF_SPEC


def setting(pair: str = "llama-8b-1b", gpus: int = 1, context: int = 512) -> Setting:
    p = PAIRS[pair]
    return Setting(HARDWARE["h100-sxm"], p.target, p.draft, "bf16", gpus, context,
                   bw_share=ACHIEVED_BANDWIDTH, flops_share=ACHIEVED_FLOPS)


def test_the_draft_model_is_the_roofline_of_the_pair():
    s = setting()
    costs = drafter_costs(s, "model")
    assert costs.method == "draft_model"
    assert [costs.cycle(b, 3) for b in (1, 64)] == [setting_costs(s).cycle(b, 3)
                                                     for b in (1, 64)]


def test_an_eagle_head_takes_the_drafts_place_and_names_its_checkpoint():
    s = setting()
    costs = drafter_costs(s, "eagle")
    head = EAGLE_HEADS["eagle3-llama-3.1-8b"]
    with_head = replace(s, draft=head.shape())
    assert costs.cycle(32, 4) == roofline_cycle(with_head)(32, 4)
    assert costs.cycle(32, 4) < setting_costs(s).cycle(32, 4)  # one layer, not a 1B model
    assert (costs.method, costs.draft, costs.target) == (
        "eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "meta-llama/Llama-3.1-8B-Instruct")
    # its KV cache is one layer's, its weights a few hundred million: more sequences fit
    assert costs.fits(max_batch_that_fits(s), 4)
    assert "EAGLE-3 head" in costs.describe


def test_a_head_is_chosen_for_the_target_or_refused_for_another():
    assert eagle_head(setting()) is EAGLE_HEADS["eagle3-llama-3.1-8b"]
    assert eagle_head(setting("shipped"), "shipped-eagle") is EAGLE_HEADS["shipped-eagle"]
    assert eagle_head(setting("llama-70b-1b")) is EAGLE_HEADS["eagle3-llama-3.3-70b"]
    with pytest.raises(PlanError, match="no EAGLE head preset drafts for Qwen2.5 7B"):
        eagle_head(setting("qwen-7b-0.5b"))
    with pytest.raises(PlanError, match="not of the plan's target"):
        eagle_head(setting(), "shipped-eagle")
    with pytest.raises(PlanError, match="no EAGLE head preset 'nope'"):
        eagle_head(setting(), "nope")


def test_self_speculation_prices_the_bounded_draft_and_keeps_its_cache_beside_the_targets():
    s = setting(gpus=8, context=32000)
    costs = drafter_costs(s, SELF_SPEC, budget=512)
    step = target_pass(s, 64).seconds
    draft = analytic.self_spec_draft_pass(s, 64, 512).seconds
    assert costs.cycle(64, 3) == pytest.approx((3 * draft + target_pass(s, 64, 4).seconds)
                                               / step)
    assert costs.method == SELF_SPEC and costs.draft == costs.target == "meta-llama/Llama-3.1-8B"
    # no draft weights, but each sequence adds 512 more tokens of the target's KV cache
    weights, per_sequence = analytic.self_spec_bytes(replace(s, k=3), 512)
    assert weights == s.target.params * 2 / 8
    assert per_sequence == (32000 + 4 + 512) * s.target.kv_bytes_per_token("bf16", 8)
    most = int((s.hardware.memory * s.usable - weights) // per_sequence)
    assert costs.fits(most, 3) and not costs.fits(most + 1, 3)
    # a larger budget reads more a draft step
    assert drafter_costs(s, SELF_SPEC, budget=4096).cycle(64, 3) > costs.cycle(64, 3)


def test_self_speculation_pays_more_as_the_batch_grows_at_long_context():
    """MagicDec's finding: the target's KV reads grow with B, the draft's stay bounded."""
    s = setting(gpus=8, context=32000)
    costs = drafter_costs(s, SELF_SPEC)
    gains = [3 / costs.cycle(b, 3) for b in (8, 32, 128)]  # tokens a cycle held fixed
    assert gains == sorted(gains) and gains[-1] > gains[0] * 1.3


@pytest.mark.parametrize("budget", [0, 200_000])
def test_a_draft_kv_budget_out_of_range_is_refused(budget):
    with pytest.raises(PlanError, match="--draft-kv-budget must be from 1"):
        drafter_costs(setting(), SELF_SPEC, budget=budget)


def test_an_unknown_drafter_is_refused():
    with pytest.raises(PlanError, match="--drafter must be one of model, eagle, medusa, mtp, "
                                        "self-spec"):
        drafter_costs(setting(), "lookahead")
