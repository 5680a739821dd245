"""Models whose caches are not plain attention caches, on transformers' path.

A sliding window drops positions as the sequence grows, so rolling back past the window
once raised ("`crop` was called, but the current layer does not track past states"); the
cache now keeps what a rollback may need. A linear-attention (recurrent) layer keeps the
state after each token of a pass (transformers >= 5.25), so a hybrid model such as
Qwen3-Next speculates; a family whose modeling code keeps no such states is refused at load,
by a rollback check that does the rollback, with a message that says why.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from support.lossless import chi_square_pvalue, target_marginals, token_counts
from support.runs import run_batch
from support.tiny_models import (
    CORPUS,
    build_linear_attention,
    build_llama,
    build_mistral,
    build_tokenizer,
    build_zamba,
    save,
)

from engine.decoder import loading
from engine.decoder.baseline import run_target_only
from engine.decoder.batched import BatchConfig
from engine.decoder.events import GenerationConfig
from engine.decoder.forward import FastDecoder
from engine.decoder.loading import PairError, load_pair
from engine.decoder.sampling import warp
from engine.decoder.speculative import speculate

PROMPT = "the quick brown fox"
WINDOW = 8


@pytest.fixture(scope="module")
def sliding_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("sliding")
    tokenizer = build_tokenizer(CORPUS)
    target = build_mistral(seed=0, sliding_window=WINDOW)
    draft = build_mistral(seed=0, sliding_window=WINDOW)
    draft.load_state_dict(perturbed_state(target))
    pair = load_pair(save(root, "target", target, tokenizer), save(root, "draft", draft, tokenizer),
                     device="cpu")
    return dataclasses.replace(pair, stop_token_ids=frozenset())


def perturbed_state(model) -> dict:
    """The weights of ``model`` with noise (the draft: mostly right, sometimes rejected)."""
    gen = torch.Generator().manual_seed(1)
    state = {}
    for name, tensor in model.state_dict().items():
        noise = torch.randn(tensor.shape, generator=gen) * tensor.std() * 0.3
        state[name] = tensor + noise if tensor.dim() > 1 else tensor
    return state


@pytest.mark.parametrize("k", [1, 3, 5])
def test_greedy_speculation_past_the_window_equals_the_targets_greedy_decoding(sliding_pair, k):
    assert FastDecoder.of(sliding_pair.target) is None  # transformers' path, its sliding cache
    config = GenerationConfig(prompt=PROMPT, k=k, temperature=0.0, max_new_tokens=40)
    *cycles, done = speculate(sliding_pair, config)
    assert len(done.token_ids) == 40  # five times the window
    assert any(c.rejected for c in cycles)  # rollbacks happened past the window
    assert done.token_ids == run_target_only(sliding_pair, config)[1].token_ids
    ids = torch.tensor([sliding_pair.tokenizer(PROMPT).input_ids])
    with torch.inference_mode():
        theirs = sliding_pair.target.generate(ids, attention_mask=torch.ones_like(ids),
                                              do_sample=False, max_new_tokens=40,
                                              eos_token_id=[], pad_token_id=0)
    assert done.token_ids == theirs[0, ids.shape[1]:].tolist()


def fresh_rows(model, ids: list[int], n: int, config: GenerationConfig, vocab: int):
    """The warped distributions at the last ``n`` positions of ``ids``, from one pass over
    the whole sequence without a cache: what a correctly rolled-back cache must give."""
    with torch.inference_mode():
        logits = model(torch.tensor([ids])).logits[0, -n:, :vocab]
    return warp(logits, config.temperature, config.top_k, config.top_p)


def checked_speculation(pair, config: GenerationConfig) -> tuple[list, list]:
    """Speculate with a hook that holds every cycle's p (target) and q (draft) against the
    models' own on the true prefix, computed afresh; the output's tokens and, a cycle each,
    ``(tokens before it, whether a draft was rejected)``."""
    vocab, checked = pair.shared_vocab_size, []

    def check(before: list[int], outcome) -> None:
        drafts = outcome.drafts
        p = fresh_rows(pair.target, before + drafts, len(drafts) + 1, config, vocab)
        q = fresh_rows(pair.draft, before + drafts[:-1], len(drafts), config, vocab)
        torch.testing.assert_close(outcome.p, p, atol=1e-4, rtol=1e-3)
        torch.testing.assert_close(outcome.q, q, atol=1e-4, rtol=1e-3)
        checked.append((len(before), outcome.n_accepted < len(drafts)))

    return list(speculate(pair, config, on_verify=check))[-1].token_ids, checked


def test_sampled_speculation_past_the_window_runs_on_correctly_rolled_back_caches(sliding_pair):
    """A cache that kept a rejected draft, or lost a position it needed, would give other
    distributions than fresh passes."""
    config = GenerationConfig(prompt=PROMPT, k=4, temperature=1.0, max_new_tokens=40, seed=3)
    tokens, checked = checked_speculation(sliding_pair, config)
    assert len(tokens) == 40
    prompt = len(sliding_pair.tokenizer(PROMPT).input_ids)
    # Rejections (rollbacks) happened with more than a window of text behind them.
    assert any(rejected and length > prompt + WINDOW for length, rejected in checked)


@pytest.fixture(scope="module")
def hybrid_pair(tmp_path_factory):
    """A tiny Qwen3-Next target (one linear-attention layer, one attention layer) and an
    unrelated one as its draft (at temperature 1 a perturbed copy is rarely rejected)."""
    root = tmp_path_factory.mktemp("hybrid")
    tokenizer = build_tokenizer(CORPUS)
    target, draft = build_linear_attention(seed=0), build_linear_attention(seed=1)
    pair = load_pair(save(root, "target", target, tokenizer), save(root, "draft", draft, tokenizer),
                     device="cpu")
    return dataclasses.replace(pair, stop_token_ids=frozenset())


@pytest.mark.parametrize("k", [1, 4])
def test_greedy_speculation_with_a_hybrid_model_equals_the_targets_greedy_decoding(hybrid_pair,
                                                                                   k):
    config = GenerationConfig(prompt=PROMPT, k=k, temperature=0.0, max_new_tokens=30)
    *cycles, done = speculate(hybrid_pair, config)
    assert len(done.token_ids) == 30
    assert any(c.rejected for c in cycles)  # recurrent states were rolled back
    assert done.token_ids == run_target_only(hybrid_pair, config)[1].token_ids


def test_sampled_speculation_with_a_hybrid_model_runs_on_correctly_rolled_back_states(
        hybrid_pair):
    """A recurrent state that kept a rejected draft would give other distributions than
    fresh passes."""
    config = GenerationConfig(prompt=PROMPT, k=4, temperature=1.0, max_new_tokens=30, seed=5)
    tokens, checked = checked_speculation(hybrid_pair, config)
    assert len(tokens) == 30
    # checked after rollbacks, not only after full acceptances
    assert sum(rejected for _, rejected in checked) >= 2


def test_sampled_speculation_with_a_hybrid_model_is_distributed_as_the_target(hybrid_pair):
    """The second token comes after the first cycle's rollback whenever a draft was rejected:
    its marginal is the target's only if the recurrent state was restored."""
    first, second = token_counts(hybrid_pair, PROMPT, runs=1500)
    p1, p2 = target_marginals(hybrid_pair, PROMPT)
    assert chi_square_pvalue(first, p1) > 1e-3
    assert chi_square_pvalue(second, p2) > 1e-3


def test_a_rollback_that_restores_nothing_is_caught_by_the_load_check(tmp_path, monkeypatch):
    """The check does the rollback and compares with a fresh pass: with the crop skipped, the
    hybrid model that passes above is refused."""
    tokenizer = build_tokenizer(CORPUS)
    hybrid = save(tmp_path, "hybrid", build_linear_attention(seed=0), tokenizer)
    monkeypatch.setattr(loading, "rollback", lambda cache, n: None)
    with pytest.raises(PairError, match="next logits differ from a fresh pass"):
        load_pair(hybrid, hybrid, device="cpu", warmup=False)


def test_a_family_whose_layers_keep_no_intermediate_states_is_refused_with_a_reason(tmp_path):
    """Zamba's cache layers say they can be cropped, but its modeling code never asks for
    the states after each token, so a rollback cannot restore them."""
    tokenizer = build_tokenizer(CORPUS)
    zamba = save(tmp_path, "zamba", build_zamba(seed=0), tokenizer)
    plain = save(tmp_path, "plain", build_llama(seed=0), tokenizer)
    with pytest.raises(PairError, match="cannot be used for speculative decoding.*target-only"):
        load_pair(zamba, plain, device="cpu", warmup=False)
    # Alone (target-only decoding) it needs no rollback and loads.
    assert load_pair(zamba, None, device="cpu", warmup=False).draft is None


def test_batched_decoding_refuses_a_hybrid_model_with_a_reason(hybrid_pair):
    config = BatchConfig(prompts=[PROMPT, PROMPT], k=2, max_new_tokens=4)
    with pytest.raises(ValueError, match="batched decoding needs the engine's pass"):
        run_batch(hybrid_pair, config)
