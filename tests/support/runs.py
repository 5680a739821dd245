"""Whole runs the tests want in one call: a batched run to its end, and an EAGLE head's
proposal after a prompt from scratch (the engine drives both step by step)."""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from engine.decoder.batched import BatchConfig, BatchDoneEvent, BatchStepEvent, speculate_batch
from engine.decoder.eagle import EagleHead, propose, target_features
from engine.decoder.loading import ModelPair
from engine.decoder.ngram import PromptLookup
from engine.decoder.sampling import warp


def run_batch(pair: ModelPair, config: BatchConfig, lookup: PromptLookup | None = None,
              eagle: EagleHead | None = None) -> tuple[list[BatchStepEvent], BatchDoneEvent]:
    """:func:`engine.decoder.batched.speculate_batch` run to the end."""
    *steps, done = speculate_batch(pair, config, lookup=lookup, eagle=eagle)
    return steps, done


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
