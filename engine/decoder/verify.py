"""The verification rule: modified rejection sampling (Leviathan et al. 2023, Algorithm 1;
Chen et al. 2023).

For draft tokens ``x_1..x_k`` drawn from ``q`` and the target's ``p`` at the same positions::

    for i in 1..k:
        accept x_i with probability min(1, p_i(x_i) / q_i(x_i))
        on the first rejection: emit x' ~ norm(max(0, p_i - q_i)) and stop
    if all k were accepted: emit x' ~ p_{k+1}          (the bonus token)

Every emitted token is then distributed exactly as under ``p`` alone. With one-hot (greedy)
``p`` and ``q`` the ratio is 1 when the draft token is the target's argmax and 0 otherwise,
and the correction is the target's argmax: the rule becomes greedy verification, which
:func:`verify_greedy` computes from the argmaxes alone.
"""

from __future__ import annotations

import torch

from engine.decoder.sampling import sample


def verify(
    draft_tokens: torch.Tensor,
    q: torch.Tensor,
    p: torch.Tensor,
    generator: torch.Generator | None = None,
) -> tuple[int, int]:
    """Judge one cycle's draft.

    Args:
        draft_tokens: ``[k]`` the draft's tokens, ``x_i`` drawn from ``q[i]``.
        q: ``[k, V]`` the draft's probabilities at the k drafted positions.
        p: ``[k+1, V]`` the target's probabilities at the same k positions plus one more.
        generator: the random source (on the tensors' device) for seeded runs.

    Returns:
        ``(n_accepted, next_token)``: the first ``n_accepted`` draft tokens are kept and
        ``next_token`` follows them (the correction after a rejection, else the bonus).
    """
    k = draft_tokens.shape[0]
    rows = torch.arange(k, device=p.device)
    p_x = p[rows, draft_tokens]  # p_i(x_i), [k]
    q_x = q[rows, draft_tokens]  # q_i(x_i), [k]
    u = torch.rand(k, generator=generator, device=p.device)
    # u < p/q  <=>  u q < p  (no division, and q(x) = 0 < p(x) accepts)
    accepted = u * q_x < p_x
    n = int(accepted.long().cumprod(dim=0).sum())  # length of the accepted prefix
    if n == k:
        return k, int(sample(p[k], generator))
    return n, int(sample(residual(p[n], q[n]), generator))


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``norm(max(0, p - q))`` for ``[V]`` rows; falls back to ``p`` when p and q coincide
    (then a rejection has probability zero and only rounding can reach here)."""
    r = (p - q).clamp_min_(0.0)
    total = r.sum()
    return torch.where(total > 0, r / total, p)


def verify_greedy(draft_tokens: list[int], target_tokens: list[int]) -> tuple[int, int]:
    """:func:`verify` at temperature 0, where ``p`` and ``q`` are one-hot: accept while the
    draft's token is the target's argmax; the next token is the target's argmax after the
    accepted prefix (the correction, or the bonus token when all ``k`` match).

    Args:
        draft_tokens: the ``k`` draft tokens.
        target_tokens: the target's argmax at the same ``k`` positions plus one more.

    Returns:
        ``(n_accepted, next_token)``, as :func:`verify` gives for one-hot ``p`` and ``q``
        (without drawing random numbers).
    """
    n = 0
    while n < len(draft_tokens) and draft_tokens[n] == target_tokens[n]:
        n += 1
    return n, target_tokens[n]
