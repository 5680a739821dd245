"""A model's KV cache for the rows of a batch, behind one small interface the step uses:
``run(ids, valid, keep)``, ``rollback(counts)`` and ``keep_rows(order)``.

A batch of one goes through the single stream's cache (:func:`engine.decoder.forward.new_cache`:
the engine's fast pass, with CUDA graphs when enabled, or transformers' for any other model);
more rows through a :class:`engine.decoder.forward.RaggedCache` (the engine's pass with
per-row lengths, positions and masks).
"""

from __future__ import annotations

import torch

from engine.decoder.forward import (
    FastDecoder,
    KVCache,
    RaggedCache,
    forward,
    new_cache,
    rollback,
)


class OneRow:
    """A batch of one through the single stream's cache: any model."""

    def __init__(self, model, capacity: int, depth: int):
        """``depth``: the most positions one rollback removes."""
        self.model, self.cache = model, new_cache(model, capacity, rollback=depth)

    def run(self, ids: torch.Tensor, valid: list[int], keep: int, hidden: list | None = None
            ) -> torch.Tensor:
        """``ids [1, n]``: logits ``[1, keep, V]`` of the row's last ``keep`` real tokens;
        ``hidden`` receives the final hidden states ``[1, n, H]`` (the engine's pass only)."""
        ids = ids[:, : valid[0]]
        if hidden is not None:
            if not isinstance(self.cache, KVCache):
                raise ValueError("this drafter reads the target's hidden states, which only "
                                 "the engine's own forward pass (Llama-family models) hands "
                                 "back")
            return self.cache.decoder(self.cache, ids, keep, hidden)
        return forward(self.model, self.cache, ids, keep)[None]

    def rollback(self, counts: list[int]) -> None:
        rollback(self.cache, counts[0])

    def keep_rows(self, order: list[int]) -> None:
        pass  # the batch ends when its one row does


class Rows:
    """``B`` rows in a :class:`RaggedCache`."""

    def __init__(self, model, capacity: int, batch: int):
        self.cache = RaggedCache(FastDecoder.of(model), capacity, batch)

    def run(self, ids: torch.Tensor, valid: list[int], keep: int, hidden: list | None = None
            ) -> torch.Tensor:
        """``ids [B, n]``, row ``b``'s first ``valid[b]`` real: logits ``[B, keep, V]`` at each
        row's last ``keep`` real positions; ``hidden`` receives ``[B, n, H]``."""
        return self.cache.decoder.ragged(self.cache, ids, valid, keep, hidden)

    def rollback(self, counts: list[int]) -> None:
        self.cache.rollback(counts)

    def keep_rows(self, order: list[int]) -> None:
        self.cache.keep_rows(order)


def rows_for(model, capacity: int, batch: int, depth: int) -> OneRow | Rows:
    """``depth``: the most positions one rollback removes (k_max + 1)."""
    return OneRow(model, capacity, depth) if batch == 1 else Rows(model, capacity, batch)


def padded(lists: list[list[int]], device, width: int | None = None) -> torch.Tensor:
    """``[B, width]`` int64: each list padded with 0 to ``width`` (default: the longest)."""
    width = max((len(ids) for ids in lists), default=0) if width is None else width
    return torch.tensor([ids + [0] * (width - len(ids)) for ids in lists], dtype=torch.long,
                        device=device).view(len(lists), width)


def survivors_order(live: list[int]) -> list[int]:
    """The new row order when only the rows at positions ``live`` stay: each survivor past
    the new end moves into a hole left by a finished row (the others keep their places), so
    retiring ``r`` rows moves at most ``r`` rows of the caches, not all of them."""
    size = len(live)
    staying = set(live)
    holes = [i for i in range(size) if i not in staying]
    movers = [j for j in live if j >= size]
    order = list(range(size))
    for hole, mover in zip(holes, movers, strict=True):
        order[hole] = mover
    return order
