"""Lossless sampling, checked end to end: the tokens of many seeded speculative runs are
counted and compared, by chi-square, with the target's own distribution computed exactly."""

from __future__ import annotations

import dataclasses

import torch
from scipy.stats import chisquare

from engine.decoder.baseline import encode_prompt
from engine.decoder.drafter_spec import DRAFT_MODEL, DrafterSpec
from engine.decoder.events import GenerationConfig
from engine.decoder.speculative import speculate


def token_counts(pair, prompt: str, runs: int, draft_sample: str = "probabilistic",
                 drafter: DrafterSpec = DRAFT_MODEL) -> tuple[torch.Tensor, torch.Tensor]:
    """How often each id came first and second in ``runs`` sampled speculative runs
    (k = 3, temperature 1, seeds 0..runs-1, the draft sampling given, by ``drafter``): two
    ``[V]`` count vectors."""
    pair = dataclasses.replace(pair, stop_token_ids=frozenset())  # an end token is a token
    vocab = pair.shared_vocab_size
    counts = torch.zeros(2, vocab)
    for seed in range(runs):
        config = GenerationConfig(prompt=prompt, k=3, temperature=1.0, max_new_tokens=2,
                                  seed=seed, draft_sample=draft_sample)
        first, second = list(speculate(pair, config, drafter=drafter))[-1].token_ids
        counts[0, first] += 1
        counts[1, second] += 1
    return counts[0], counts[1]


@torch.inference_mode()
def target_marginals(pair, prompt: str, temperature: float = 1.0) -> tuple[torch.Tensor, ...]:
    """The target's own ``p(x1)`` and ``p(x2) = sum_x1 p(x1) p(x2 | x1)`` after ``prompt``
    at ``temperature``, in float64 (every possible x1 in one batch)."""
    vocab = pair.shared_vocab_size
    ids = encode_prompt(pair, GenerationConfig(prompt=prompt, max_new_tokens=2))
    prompt_ids = torch.tensor([ids], device=pair.device)
    p1 = (pair.target(input_ids=prompt_ids).logits[0, -1, :vocab].double() / temperature
          ).softmax(-1)
    batch = torch.cat([prompt_ids.expand(vocab, -1),
                       torch.arange(vocab, device=pair.device)[:, None]], dim=1)
    p2_given = (pair.target(input_ids=batch).logits[:, -1, :vocab].double() / temperature
                ).softmax(-1)
    return p1.cpu(), (p1 @ p2_given).cpu()


def chi_square_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Ids expected fewer than 5 times are pooled into one cell, as chi-square needs."""
    expected = probs * counts.sum()
    small = expected < 5
    observed, expected = counts[~small].double(), expected[~small]
    if small.any():  # one pooled cell, only where there is something to pool
        observed = torch.cat([observed, counts[small].double().sum(0, keepdim=True)])
        expected = torch.cat([expected, (probs * counts.sum())[small].sum(0, keepdim=True)])
    return chisquare(observed.numpy(), expected.numpy()).pvalue
