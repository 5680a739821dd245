"""Models whose caches are not plain attention caches, on transformers' path.

A sliding window drops positions as the sequence grows, so rolling back past the window
once raised ("`crop` was called, but the current layer does not track past states"); the
cache now keeps what a rollback may need. A linear-attention layer's recurrent state cannot
be rolled back at all: such a model is refused at load with a message that says why.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from support.tiny_models import (
    CORPUS,
    build_linear_attention,
    build_llama,
    build_mistral,
    build_tokenizer,
    save,
)

from engine.decoder.baseline import run_target_only
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


def test_sampled_speculation_past_the_window_runs_on_correctly_rolled_back_caches(sliding_pair):
    """Every cycle's p (target) and q (draft) are those of the models on the true prefix,
    computed afresh: a cache that kept a rejected draft, or lost a position it needed,
    would give other distributions."""
    config = GenerationConfig(prompt=PROMPT, k=4, temperature=1.0, max_new_tokens=40, seed=3)
    vocab = sliding_pair.shared_vocab_size
    checked = []

    def check(before: list[int], outcome) -> None:
        drafts = outcome.drafts
        p = fresh_rows(sliding_pair.target, before + drafts, len(drafts) + 1, config, vocab)
        q = fresh_rows(sliding_pair.draft, before + drafts[:-1], len(drafts), config, vocab)
        torch.testing.assert_close(outcome.p, p, atol=1e-4, rtol=1e-3)
        torch.testing.assert_close(outcome.q, q, atol=1e-4, rtol=1e-3)
        checked.append((len(before), outcome.n_accepted < len(drafts)))

    done = list(speculate(sliding_pair, config, on_verify=check))[-1]
    assert len(done.token_ids) == 40
    prompt = len(sliding_pair.tokenizer(PROMPT).input_ids)
    # Rejections (rollbacks) happened with more than a window of text behind them.
    assert any(rejected and length > prompt + WINDOW for length, rejected in checked)


def test_a_linear_attention_model_is_refused_at_load_with_a_reason(tmp_path):
    tokenizer = build_tokenizer(CORPUS)
    linear = save(tmp_path, "linear", build_linear_attention(seed=0), tokenizer)
    plain = save(tmp_path, "plain", build_llama(seed=0), tokenizer)
    with pytest.raises(PairError, match="linear-attention .* cannot be rolled back"):
        load_pair(linear, plain, device="cpu", warmup=False)
    # Alone (target-only decoding) it needs no rollback and loads.
    assert load_pair(linear, None, device="cpu", warmup=False).draft is None
