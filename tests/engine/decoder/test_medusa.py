"""Medusa heads as a drafter of the engine's one step: lossless as the other drafters are
(greedy equals the target's own greedy decoding, sampled tokens are distributed as the
target's and a broken rule is caught), each head's q at every cycle what the heads give
afresh from the target's hidden state, and the checkpoint in vLLM's layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from support.lossless import chi_square_pvalue, target_marginals, token_counts
from support.runs import run_batch

import engine.decoder.step as step_module
from engine.decoder.baseline import run_target_only
from engine.decoder.batched import BatchConfig
from engine.decoder.common import encode_prompt
from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.eagle import target_features
from engine.decoder.events import CycleEvent, GenerationConfig
from engine.decoder.loading import load_pair
from engine.decoder.medusa import MedusaHeads, load_heads_for
from engine.decoder.sampling import sample_with, warp
from engine.decoder.speculative import speculate
from engine.decoder.verify import verify_batch

MODELS = Path(__file__).parents[3] / "models"
PROMPT = "the quick brown fox"


@pytest.fixture(scope="module")
def shipped():
    """The shipped target (no draft model) and the heads trained for it."""
    pair = load_pair(str(MODELS / "target"), None, device="cpu")
    return pair, load_heads_for(pair, MODELS / "medusa")


@pytest.fixture(scope="module")
def random_heads(target_only_pair):
    """Heads with random blocks for the tiny target: mostly rejected, so the residual
    distribution carries many tokens."""
    torch.manual_seed(5)
    heads = MedusaHeads.for_target(target_only_pair.target, num_heads=3)
    for block in heads.blocks:
        for layer in block.layers:
            torch.nn.init.normal_(layer.weight, std=0.5)
    return heads.eval()


def greedy_alone(pair, prompt: str, budget: int) -> list[int]:
    config = GenerationConfig(prompt=prompt, temperature=0.0, max_new_tokens=budget)
    return run_target_only(pair, config)[1].token_ids


# ---- greedy: the target's own tokens ------------------------------------------------------


@pytest.mark.parametrize("k", [1, 4])
def test_greedy_with_the_shipped_heads_equals_target_greedy_decoding(shipped, k):
    pair, heads = shipped
    held_out = json.loads((MODELS / "heldout_prompts.json").read_text())
    accepted = trials = 0
    for domain in held_out.values():
        prompt = domain[0][:120]
        config = GenerationConfig(prompt=prompt, k=k, temperature=0.0, max_new_tokens=40)
        events = list(speculate(pair, config, drafter=DrafterSpec.medusa(heads)))
        assert events[-1].token_ids == greedy_alone(pair, prompt, 40), prompt
        cycles = [e for e in events if isinstance(e, CycleEvent)]
        assert {c.drafter for c in cycles} == {"medusa"}
        accepted += sum(c.n_accepted for c in cycles)
        trials += sum(c.n_accepted + c.rejected for c in cycles)
    assert accepted / trials > 0.2  # trained heads: often accepted, not chance (1/4096)


def test_greedy_rows_of_a_batch_with_the_heads_equal_target_greedy_decoding(shipped):
    pair, heads = shipped
    prompts = [PROMPT, "a", "the cat sat on the mat and the lazy dog", "héllo wörld"]
    budgets = [30, 9, 21, 14]
    for k in (3, [2, 0, 0, 4, 1, 0, 3]):
        config = BatchConfig(prompts, k=k, temperature=0.0, max_new_tokens=budgets)
        _, done = run_batch(pair, config, DrafterSpec.medusa(heads))
        for prompt, budget, tokens in zip(prompts, budgets, done.token_ids, strict=True):
            assert tokens == greedy_alone(pair, prompt, budget), (k, prompt)


def test_a_one_token_prompt_first_proposes_nothing_then_drafts(shipped):
    pair, heads = shipped
    config = GenerationConfig(prompt="a", k=3, temperature=0.0, max_new_tokens=12)
    assert len(encode_prompt(pair, config)) == 1
    events = list(speculate(pair, config, drafter=DrafterSpec.medusa(heads)))
    cycles = [e for e in events if isinstance(e, CycleEvent)]
    assert cycles[0].n_proposed == 0
    assert all(c.n_proposed == 3 for c in cycles[1:])
    assert events[-1].token_ids == greedy_alone(pair, "a", 12)


def test_k_beyond_the_heads_is_refused(shipped):
    pair, heads = shipped
    config = GenerationConfig(prompt=PROMPT, k=heads.num_heads + 1)
    with pytest.raises(ValueError, match=f"k must be at most {heads.num_heads}"):
        speculate(pair, config, drafter=DrafterSpec.medusa(heads))


# ---- each head's proposal is the heads' own, afresh -----------------------------------------


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_each_heads_q_is_what_the_heads_give_from_the_hidden_state_that_chose_the_newest(
        shipped, temperature):
    """Head i reads the target's final hidden state at the position whose logits chose the
    row's newest token and guesses the token i + 1 places after it; at T > 0 it samples from
    its own warped q_i, whatever the other heads drew."""
    pair, heads = shipped
    seen = []

    def check(prefix: list[int], outcome) -> None:
        with torch.inference_mode():
            h = target_features(pair.target, torch.tensor([prefix]))[0, len(prefix) - 2]
            for i in range(len(outcome.drafts)):
                logits = heads.logits(h, i).float()
                expected = (torch.nn.functional.one_hot(logits.argmax(), logits.shape[-1])
                            .float() if temperature == 0.0 else warp(logits, temperature))
                assert torch.allclose(outcome.q[i], expected, atol=1e-4), (len(prefix), i)
        seen.append(len(outcome.drafts))

    config = GenerationConfig(prompt=PROMPT, k=4, temperature=temperature, top_k=0, top_p=1.0,
                              max_new_tokens=24, seed=3)
    list(speculate(pair, config, on_verify=check, drafter=DrafterSpec.medusa(heads)))
    assert seen and set(seen) == {4}


# ---- sampled: distributed as the target ---------------------------------------------------


def test_sampled_tokens_with_mostly_rejected_heads_are_distributed_as_the_target(
        target_only_pair, random_heads):
    first, second = token_counts(target_only_pair, PROMPT, runs=2000,
                                 drafter=DrafterSpec.medusa(random_heads))
    p1, p2 = target_marginals(target_only_pair, PROMPT)
    assert chi_square_pvalue(first, p1) > 1e-3
    assert chi_square_pvalue(second, p2) > 1e-3


def test_the_harness_rejects_the_heads_proposals_under_a_broken_rule(
        target_only_pair, random_heads, monkeypatch):
    """After a rejection, drawing from p instead of norm(max(0, p - q)): the first token's
    chi-square fails with the heads' proposals as it does with the draft model's."""

    def resampling_from_p(draft_tokens, q, p, lengths, uniforms):
        n, token = verify_batch(draft_tokens, q, p, lengths, uniforms)
        u_next = uniforms.gather(1, lengths[:, None])[:, 0]
        from_p = sample_with(p[torch.arange(len(n)), n], u_next)
        return n, torch.where(n < lengths, from_p, token)

    monkeypatch.setattr(step_module, "verify_batch", resampling_from_p)
    first, _ = token_counts(target_only_pair, PROMPT, runs=2000,
                            drafter=DrafterSpec.medusa(random_heads))
    assert chi_square_pvalue(first, target_marginals(target_only_pair, PROMPT)[0]) < 1e-6


# ---- the checkpoint ------------------------------------------------------------------------


def test_the_checkpoint_is_in_vllms_medusa_layout_and_loads_back(random_heads, tmp_path):
    random_heads.save(tmp_path, dtype=torch.float32)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "medusa" and config["num_heads"] == 3
    assert config["medusa_fc_bias"] is True and config["original_lm_head"] is True
    names = set(load_file(str(tmp_path / "model.safetensors")))
    assert names == {f"blocks.{i}.layers.0.{w}" for i in range(3) for w in ("weight", "bias")
                     } | {"lm_head.weight"}
    again = MedusaHeads.load(tmp_path)
    h = torch.randn(2, random_heads.config["hidden_size"])
    assert torch.equal(again(h), random_heads(h))


def test_heads_for_another_target_are_refused(target_only_pair):
    with pytest.raises(ValueError, match="another target"):
        load_heads_for(target_only_pair, MODELS / "medusa")
