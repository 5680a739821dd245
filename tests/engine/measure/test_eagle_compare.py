"""The offline comparison of the EAGLE head with the draft model: its sampler is lossless,
its counts are right where the answer is known, and the head drafts in it as it would fresh."""

from __future__ import annotations

import pytest
import torch
from support.tiny_models import build_llama

from engine.decoder.eagle import EagleHead, head_config
from engine.measure.eagle_compare import (
    HeadDrafter,
    ModelDrafter,
    draft_step_costs,
    multiply_adds,
    pooled,
    run_prompt,
)


@pytest.fixture(scope="module")
def target():
    return build_llama(seed=0)


@pytest.fixture(scope="module")
def head(target):
    torch.manual_seed(3)
    return EagleHead(head_config(target.config), target).eval()


PROMPT = torch.tensor([5, 17, 42, 9, 100, 7])


@torch.inference_mode()
def greedy(target, ids: torch.Tensor, n: int) -> list[int]:
    out = []
    for _ in range(n):
        token = int(target(input_ids=ids[None]).logits[0, -1].argmax())
        out.append(token)
        ids = torch.cat([ids, torch.tensor([token])])
    return out


def test_greedy_with_the_head_gives_the_targets_own_greedy_text(target, head):
    run = run_prompt(target, HeadDrafter(head), PROMPT, k=3, temperature=0.0,
                     max_new_tokens=20, seed=0, eos=None)
    assert run.tokens == greedy(target, PROMPT, 20)
    assert run.cycles > 0 and 0 <= run.accepted <= run.trials <= 3 * run.cycles


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_target_drafting_for_itself_is_always_accepted(target, temperature):
    run = run_prompt(target, ModelDrafter(target), PROMPT, k=4, temperature=temperature,
                     max_new_tokens=21, seed=1, eos=None)  # the first, then 4 cycles of 5
    assert run.accepted == run.trials == 4 * run.cycles
    assert run.accepted_at == [run.cycles] * 4
    assert run.overlap == pytest.approx(run.trials, rel=1e-4)  # sum min(p, q) = 1 when q = p
    result = pooled([run], 4, seed=0)
    assert result["alpha_counted"] == 1.0 and result["per_position_acceptance"] == [1.0] * 4
    assert run.cycles == 4 and result["tokens_per_cycle"] == 5.0  # 4 drafts + 1 bonus


def test_intervals_surround_the_pooled_alpha(target, head):
    runs = [run_prompt(target, HeadDrafter(head), torch.tensor(p), k=2, temperature=1.0,
                       max_new_tokens=12, seed=i, eos=None)
            for i, p in enumerate([[5, 6, 7], [30, 31], [200, 2, 9, 9], [77]])]
    result = pooled(runs, 2, seed=0, bootstrap=200)
    low, high = result["alpha_counted_95"]
    assert low <= result["alpha_counted"] <= high
    assert result["accepted"] == sum(r.accepted for r in runs)


def test_multiply_adds_count_every_linear_layer_once(target, head):
    h, i, v, layers = 64, 128, 300, 2
    attention = h * h + 2 * h * 32 + h * h  # q, k and v (2 of 4 heads: grouped), o
    per_layer = attention + 3 * h * i
    assert multiply_adds(target) == layers * per_layer + v * h
    assert multiply_adds(head, target.lm_head) == 2 * h * h + per_layer + v * h


def test_draft_step_costs_time_all_three_on_both_clocks(target, head):
    costs = draft_step_costs(target, head, build_llama(seed=1, layers=1), context=8, steps=10,
                             repeats=1)
    for clock in ("wall", "cpu"):
        figures = costs[clock]
        assert figures["head_step_ms"] > 0 and figures["draft_step_ms"] > 0
        # c from the unrounded medians; the printed ms are rounded to the microsecond
        for name in ("head", "draft"):
            assert figures[f"c_{name}"] == pytest.approx(
                figures[f"{name}_step_ms"] / figures["target_step_ms"], rel=0.02, abs=2e-3)
