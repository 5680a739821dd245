"""What both decoding loops (speculative and target-only) are built from: the prompt's ids,
the prefill, the clock, the seeded generator, incremental detokenisation and the done event.

Both loops keep the same invariant: a model's KV cache holds every token of the sequence
except the last, which is the next input. So every generated token costs exactly one timed
step, and the prefill (the prompt minus its last token) stays out of the timings.
"""

from __future__ import annotations

import time

import torch

from engine.decoder.events import DoneEvent, GenerationConfig
from engine.decoder.forward import forward
from engine.decoder.loading import ModelPair

Mark = float | torch.cuda.Event  # a point in time: wall milliseconds, or a recorded CUDA event


class Clock:
    """Milliseconds, two ways.

    ``clock()`` is the wall time after waiting for the device, so the work before it is really
    done: for coarse times (a prefill, a target-only step that waits for its token anyway).

    ``mark()`` and ``spans()`` time a stretch of work without stopping it: on CUDA a mark is an
    event recorded on the device's stream, so the host keeps queueing kernels, and ``spans``
    waits once, for the last mark, then reads the device's own times between the events. A
    speculative step is timed this way: its draft passes never wait, one wait per step.
    On the CPU a mark is the wall time and nothing waits; with ``cpu_time`` it is the CPU time
    of the calling thread (what a busy machine's other processes do not inflate, for
    measurements with one torch thread).
    """

    def __init__(self, device: torch.device, cpu_time: bool = False):
        self.device = device
        self.cuda = device.type == "cuda"
        self.now = time.thread_time if cpu_time and not self.cuda else time.perf_counter

    def __call__(self) -> float:
        if self.cuda:
            torch.cuda.synchronize(self.device)
        return self.now() * 1000.0

    def mark(self) -> Mark:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(self.device))
            return event
        return self.now() * 1000.0

    def spans(self, marks: list[Mark]) -> list[float]:
        """Milliseconds between consecutive marks (``len(marks) - 1`` of them)."""
        if self.cuda:
            marks[-1].synchronize()  # the one wait: every earlier event is done by then
            return [a.elapsed_time(b) for a, b in zip(marks, marks[1:], strict=False)]
        return [b - a for a, b in zip(marks, marks[1:], strict=False)]


def detokenizer(tokenizer):
    """What :class:`TextDecoder` decodes with: the Rust tokenizer itself when
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


class TextDecoder:
    """Incremental detokenisation that never splits a UTF-8 character.

    Each new token's text is the growth of the decoded tail of the sequence; while that tail
    ends in an incomplete character (U+FFFD) the token gets "" and the text waits for the
    next one. A few tokens of left context keep word-initial spaces right (the method vLLM
    and text-generation-inference use).
    """

    CONTEXT = 5

    def __init__(self, tokenizer, prompt_ids: list[int]):
        self.tokenizer = tokenizer
        self.ids = list(prompt_ids)
        self.prefix = max(len(self.ids) - self.CONTEXT, 0)
        self.read = len(self.ids)

    def push(self, token_id: int) -> str:
        """Commit ``token_id`` to the sequence; its share of the text."""
        self.ids.append(token_id)
        text, self.prefix, self.read = self._delta(self.ids, self.prefix, self.read)
        return text

    def peek(self, token_ids: list[int]) -> list[str]:
        """The texts ``token_ids`` would get if they came next, without committing them."""
        # Only the undecoded tail matters: copy that, not the whole sequence, every cycle.
        ids, prefix, read, texts = self.ids[self.prefix :], 0, self.read - self.prefix, []
        for token_id in token_ids:
            ids.append(token_id)
            text, prefix, read = self._delta(ids, prefix, read)
            texts.append(text)
        return texts

    def _delta(self, ids: list[int], prefix: int, read: int) -> tuple[str, int, int]:
        before = self.tokenizer.decode(ids[prefix:read], skip_special_tokens=True)
        after = self.tokenizer.decode(ids[prefix:], skip_special_tokens=True)
        if len(after) > len(before) and not after.endswith("\ufffd"):
            return after[len(before) :], read, len(ids)
        return "", prefix, read
