"""Target-only decoding: the baseline that ``c``, ``v`` and the measured speedup are relative
to. Built from the same parts as the speculative loop (:mod:`engine.decoder.common`)."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from engine.decoder.common import (
    Clock,
    TextDecoder,
    detokenizer,
    done_event,
    encode_prompt,
    new_generator,
    prefill,
)
from engine.decoder.events import TARGET, DoneEvent, GenerationConfig, StepEvent, Token
from engine.decoder.forward import forward, new_cache
from engine.decoder.loading import ModelPair
from engine.decoder.sampling import check_finite, sample, warp


def target_only(pair: ModelPair, config: GenerationConfig) -> Iterator[StepEvent | DoneEvent]:
    """Decode with the target alone: one :class:`StepEvent` per token, then a
    :class:`DoneEvent`. Bad settings raise ``ValueError`` here, before anything runs."""
    config.validate()
    prompt_ids = encode_prompt(pair, config)
    return _target_only(pair, config, prompt_ids)


def run_target_only(pair: ModelPair, config: GenerationConfig) -> tuple[list[StepEvent], DoneEvent]:
    """:func:`target_only` run to the end."""
    *steps, done = target_only(pair, config)
    return steps, done


def _target_only(
    pair: ModelPair, config: GenerationConfig, prompt_ids: list[int]
) -> Iterator[StepEvent | DoneEvent]:
    clock = Clock(pair.device)
    generator = new_generator(pair, config.seed)
    cache = new_cache(pair.target, capacity=len(prompt_ids) + config.max_new_tokens)
    prefill_ms = prefill(pair.target, cache, prompt_ids, clock)
    last = torch.tensor([prompt_ids[-1]], device=pair.device)
    decoder = TextDecoder(detokenizer(pair.tokenizer), prompt_ids)
    out_ids: list[int] = []
    decode_ms, stop_reason = 0.0, "length"
    for index in range(config.max_new_tokens):
        last, token_id, step_ms = _step(pair, cache, last, config, generator, clock)
        out_ids.append(token_id)
        decode_ms += step_ms
        yield StepEvent(index, Token(token_id, decoder.push(token_id), TARGET), step_ms)
        if token_id in pair.stop_token_ids:
            stop_reason = "eos"
            break
    yield done_event("target-only", pair, out_ids, stop_reason, prefill_ms, decode_ms)


@torch.inference_mode()
def _step(pair, cache, last, config, generator, clock) -> tuple[torch.Tensor, int, float]:
    start = clock()
    logits = forward(pair.target, cache, last.view(1, 1), keep=1)[-1, : pair.shared_vocab_size]
    if config.greedy:
        token = logits.argmax()  # what sampling the one-hot warp(logits, 0) would give
        # argmax picks a NaN or +inf where there is one: checking the winner checks the row
        checked = logits[token]
    else:
        checked = warp(logits, config.temperature, config.top_k, config.top_p)
        token = sample(checked, generator)
    check_finite(checked)  # one check for both; int(token) below waits for the device anyway
    token_id = int(token)
    return token.view(1), token_id, clock() - start
