"""One row through the engine's verification rule, and the rule's residual written out: the
references the tests hold the batched engine, the theory and the losslessness proofs against
(:mod:`engine.decoder.verify` holds the rule itself, batched, as the engine runs it)."""

from __future__ import annotations

import torch

from engine.decoder.verify import verify_batch


def verify(
    draft_tokens: torch.Tensor,
    q: torch.Tensor | None,
    p: torch.Tensor,
    generator: torch.Generator | None = None,
) -> tuple[int, int]:
    """One row through :func:`verify_batch` (tests, and callers with a single sequence).

    Args:
        draft_tokens: ``[m]`` the draft's tokens.
        q: ``[m, V]`` the draft's probabilities, or None for a one-hot proposal.
        p: ``[m + 1, V]`` the target's probabilities.
        generator: the random source: ``m + 1`` uniforms, the tests first.

    Returns:
        ``(n_accepted, next_token)``.
    """
    m = draft_tokens.shape[0]
    uniforms = torch.rand((1, m + 1), generator=generator, device=p.device)
    lengths = torch.tensor([m], device=p.device)
    n, token = verify_batch(draft_tokens[None], None if q is None else q[None], p[None],
                            lengths, uniforms)
    return int(n), int(token)


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``norm(max(0, p - q))`` for ``[V]`` rows; falls back to ``p`` when p and q coincide
    (then a rejection has probability zero and only rounding can reach here)."""
    r = (p - q).clamp_min_(0.0)
    total = r.sum()
    return torch.where(total > 0, r / total, p)


def verify_greedy(draft_tokens: list[int], target_tokens: list[int]) -> tuple[int, int]:
    """:func:`engine.decoder.verify.verify_batch_greedy` for one row of host lists: accept
    while the draft's token is the target's argmax; ``(n_accepted, next_token)``."""
    n = 0
    while n < len(draft_tokens) and draft_tokens[n] == target_tokens[n]:
        n += 1
    return n, target_tokens[n]


def one_hot_q(tokens: torch.Tensor, vocab: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The lookup's ``q``: ``[m, V]`` rows one-hot at the proposed tokens ``[m]``. Through
    :func:`verify` it accepts ``x`` with probability
    ``min(1, p(x) / 1) = p(x)`` and corrects from ``norm(max(0, p - q))``: ``p`` with ``x``
    removed, renormalised."""
    q = torch.zeros(tokens.shape[0], vocab, dtype=dtype, device=tokens.device)
    return q.scatter_(1, tokens.view(-1, 1), 1.0)
