"""Target-only decoding: the baseline that ``c``, ``v`` and the measured speedup are relative
to, plus the pieces the speculative loop shares with it (prompt, prefill, clock, seed).

Both loops keep the same invariant: a model's KV cache holds every token of the sequence
except the last, which is the next input. So every generated token costs exactly one timed
step here, and the prefill (the prompt minus its last token) stays out of the timings.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch

from engine.decoder.events import TARGET, DoneEvent, GenerationConfig, StepEvent, TextDecoder, Token
from engine.decoder.forward import forward, new_cache
from engine.decoder.loading import ModelPair
from engine.decoder.sampling import sample, warp


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
    if config.temperature == 0:
        token = logits.argmax()  # what sampling the one-hot warp(logits, 0) would give
    else:
        token = sample(warp(logits, config.temperature, config.top_k, config.top_p), generator)
    token_id = int(token)
    return token.view(1), token_id, clock() - start


def done_event(
    mode: str,
    pair: ModelPair,
    out_ids: list[int],
    stop_reason: str,
    prefill_ms: float,
    decode_ms: float,
) -> DoneEvent:
    return DoneEvent(
        mode=mode,
        text=pair.tokenizer.decode(out_ids, skip_special_tokens=True),
        token_ids=out_ids,
        stop_reason=stop_reason,
        prefill_ms=prefill_ms,
        decode_ms=decode_ms,
        tok_s=1000.0 * len(out_ids) / decode_ms if decode_ms > 0 else 0.0,
    )


# ---- shared with the speculative loop ------------------------------------------------


class Clock:
    """Milliseconds of wall time; waits for the GPU first so the work is really done."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"

    def __call__(self) -> float:
        if self.cuda:
            torch.cuda.synchronize(self.device)
        return time.perf_counter() * 1000.0


def detokenizer(tokenizer):
    """What :class:`engine.decoder.events.TextDecoder` decodes with: the Rust tokenizer itself when
    that gives the same text as ``tokenizer.decode`` (no clean-up of spaces), which skips
    transformers' Python layers (about 3x faster per call); else ``tokenizer``."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or getattr(tokenizer, "clean_up_tokenization_spaces", True):
        return tokenizer
    return _Backend(backend)


class _Backend:
    def __init__(self, backend):
        self.backend = backend

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)


def new_generator(pair: ModelPair, seed: int) -> torch.Generator:
    return torch.Generator(device=pair.device).manual_seed(seed)


def encode_prompt(pair: ModelPair, config: GenerationConfig, lookahead: int = 0) -> list[int]:
    """The prompt's token ids; ``ValueError`` when it is empty or the run would not fit in
    the models' context (``lookahead``: positions a cycle may run past the output)."""
    ids = list(pair.tokenizer(config.prompt).input_ids)
    if not ids:
        raise ValueError("the prompt encodes to no tokens: give some text to continue")
    needed = len(ids) + config.max_new_tokens + lookahead
    for model in (pair.target, pair.draft):
        limit = getattr(model.config, "max_position_embeddings", None) if model else None
        if limit and needed > limit:
            raise ValueError(
                f"the prompt ({len(ids)} tokens) plus up to {config.max_new_tokens} new tokens "
                f"does not fit in the models' context of {limit} positions"
            )
    return ids


@torch.inference_mode()
def prefill(model, cache, prompt_ids: list[int], clock: Clock) -> float:
    """Put all prompt tokens but the last into ``cache``; milliseconds taken."""
    start = clock()
    if len(prompt_ids) > 1:
        ids = torch.tensor([prompt_ids[:-1]], device=clock.device)
        forward(model, cache, ids, keep=1)
    return clock() - start
