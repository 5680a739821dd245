"""Memory capacity (docs/design.md, "Memory capacity and tensor parallelism"): per GPU, the
weights of both models divided by the tensor-parallel degree ``G`` plus the KV cache of both
models for ``B`` sequences of ``L + k + 1`` tokens, against the device's memory times a usable
fraction. KV heads split across GPUs only while ``G <= kv_heads``; past that each GPU keeps one
head (vLLM replicates them), so the KV cache stops shrinking. Standard library only."""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.analytic.passes import Setting

FIT_SEARCH_MAX = 65_536  # max_batch_that_fits looks no further


@dataclass(frozen=True)
class Memory:
    """Bytes on one GPU at batch ``B``: weights, KV cache, their sum and what is usable."""

    weights: float
    kv_cache: float
    available: float

    @property
    def total(self) -> float:
        return self.weights + self.kv_cache

    @property
    def fits(self) -> bool:
        return self.total <= self.available


def _weights_and_kv_per_sequence(s: Setting, with_draft: bool = True) -> tuple[float, float]:
    """Bytes of weights on one GPU, and KV-cache bytes one sequence of ``L + k + 1`` tokens
    adds to it: both models, each split ``G`` ways (KV heads as far as they go); a draft that
    is not sharded sits whole on the first GPU, the one this counts."""
    models = ((s.target, s.gpus), (s.draft, s.draft_gpus)) if with_draft else ((s.target, s.gpus),)
    weights = sum(m.params * s.weight_bytes / g for m, g in models)
    per_token = sum(m.kv_bytes_per_token(s.kv_cache_dtype, g) for m, g in models)
    return weights, (s.context + s.k + 1) * per_token


def memory_at(s: Setting, batch: float) -> Memory:
    """What one GPU holds at batch ``B``: ``(N_p + N_q) b / G + B (L + k + 1)(kv_p + kv_q)``
    with the KV bytes per GPU, against ``memory x usable``."""
    weights, per_sequence = _weights_and_kv_per_sequence(s)
    return Memory(weights, batch * per_sequence, s.hardware.memory * s.usable)


def max_batch_that_fits(s: Setting, limit: int = FIT_SEARCH_MAX,
                        with_draft: bool = True) -> int | None:
    """The largest batch in ``1..limit`` whose weights and KV cache fit on each GPU, or None
    when even batch 1 does not. ``with_draft=False`` asks the same of plain decoding (the
    target alone), so the difference is the capacity price of speculating."""
    weights, per_sequence = _weights_and_kv_per_sequence(s, with_draft)
    available = s.hardware.memory * s.usable

    def fits(batch: int) -> bool:
        return weights + batch * per_sequence <= available

    if not fits(1):
        return None
    if math.isinf(available) or fits(limit):
        return limit
    # Memory is linear in B: the floor of the quotient, then a step either way for rounding.
    most = max(1, min(limit, math.floor((available - weights) / per_sequence)))
    while not fits(most):
        most -= 1
    while most < limit and fits(most + 1):
        most += 1
    return most
