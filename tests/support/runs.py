"""Whole runs the tests want in one call: a batched run to its end, and an EAGLE head's
proposal from scratch (the engine drives both step by step)."""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from engine.decoder.batched import BatchConfig, BatchDoneEvent, BatchStepEvent, speculate_batch
from engine.decoder.drafter_spec import DRAFT_MODEL, DrafterSpec
from engine.decoder.eagle import EagleCache, EagleHead, target_features
from engine.decoder.loading import ModelPair
from engine.decoder.sampling import warp


def run_batch(pair: ModelPair, config: BatchConfig, drafter: DrafterSpec = DRAFT_MODEL
              ) -> tuple[list[BatchStepEvent], BatchDoneEvent]:
    """:func:`engine.decoder.batched.speculate_batch` run to the end."""
    *steps, done = speculate_batch(pair, config, drafter=drafter)
    return steps, done


@torch.inference_mode()
def propose(
    head: EagleHead,
    cache: EagleCache,
    tokens: torch.Tensor,
    features: torch.Tensor,
    positions: torch.Tensor,
    k: int,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Draft ``k`` tokens per row after the newly verified entries: the head's drafting written
    out plainly, the reference the engine's :class:`engine.decoder.eagle.Eagle` is held to.

    ``tokens [B, n]``, ``features [B, n, H]``, ``positions [B, n]``: the entries since the
    last call, as :meth:`EagleHead.forward` reads them (token ``x_{t+1}`` beside the target's
    feature ``f_t`` at position t, the last one's token being the target's own next token);
    ragged rows are padded at the end with ``PADDING`` positions. The head re-runs over them
    (overwriting its cache there), then drafts from its own features. Returns the drafts
    ``[B, k]`` and, when sampling, their distributions ``q [B, k, V]`` (None when greedy).
    After the call the cache holds the k - 1 drafted entries too; the caller rolls it back to
    the verified length before the next call.
    """
    out = head(tokens, features, positions, cache)
    last = (positions >= 0).sum(dim=1) - 1  # each row's last real entry
    rows = torch.arange(tokens.shape[0])
    feature = out[rows, last][:, None]  # [B, 1, H]
    position = positions[rows, last][:, None]
    drafts, qs = [], []
    for i in range(k):
        logits = head.logits(feature[:, 0]).float()
        if temperature == 0.0:
            token = logits.argmax(-1)
        else:
            q = warp(logits, temperature)
            token = torch.multinomial(q, 1, generator=generator)[:, 0]
            qs.append(q)
        drafts.append(token)
        if i + 1 < k:
            position = position + 1
            feature = head(token[:, None], feature, position, cache)
    return torch.stack(drafts, 1), (torch.stack(qs, 1) if qs else None)


@torch.inference_mode()
def draft_after_prompt(
    target: PreTrainedModel,
    head: EagleHead,
    prompt: torch.Tensor,
    k: int,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> tuple[int, torch.Tensor, torch.Tensor | None]:
    """One cycle's proposal from scratch: the target reads ``prompt [n]`` and chooses its
    next token (argmax, or sampled at ``temperature``), then the head drafts ``k`` tokens
    after it from the target's hidden states. Returns that token, the drafts ``[k]`` and
    their distributions ``q [k, V]`` (None when greedy)."""
    features = target_features(target, prompt[None])  # [1, n, H]
    p = warp(target.lm_head(features[0, -1]).float(), temperature)
    nxt = int(p.argmax()) if temperature == 0.0 else int(
        torch.multinomial(p, 1, generator=generator))
    tokens = torch.cat([prompt[1:], torch.tensor([nxt])])[None]
    positions = torch.arange(len(prompt))[None]
    drafts, q = propose(head, head.new_cache(1, len(prompt) + k), tokens, features, positions,
                        k, temperature, generator)
    return nxt, drafts[0], (q[0] if q is not None else None)
