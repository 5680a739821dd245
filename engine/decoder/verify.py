"""The verification rule: modified rejection sampling (Leviathan et al. 2023, Algorithm 1;
Chen et al. 2023), for every row of a batch at once.

For row ``b``'s draft tokens ``x_1..x_m`` drawn from ``q`` and the target's ``p`` at the same
positions::

    for i in 1..m:
        accept x_i with probability min(1, p_i(x_i) / q_i(x_i))
        on the first rejection: emit x' ~ norm(max(0, p_i - q_i)) and stop
    if all m were accepted: emit x' ~ p_{m+1}          (the bonus token)

Every emitted token is then distributed exactly as under ``p`` alone. A one-hot ``q`` (prompt
lookup, or a draft that proposes its argmax) needs no ``[m, V]`` tensor: ``q(x) = 1``, so the
test is ``u < p(x)`` and the residual is ``p`` with ``x`` removed. With one-hot (greedy) ``p``
the rule becomes "accept while the draft's token is the target's argmax", which
:func:`verify_batch_greedy` computes from the argmaxes alone.

Random numbers: row ``b`` brings ``m_b + 1`` uniforms of its own (``m_b`` tests, then the
inverse-CDF draw of the next token), so a row's outcome never depends on the rows beside it.
Everything here stays on the device: the caller reads the results once a step.
"""

from __future__ import annotations

import torch

from engine.decoder.sampling import sample_with


def verify_batch(
    draft_tokens: torch.Tensor,
    q: torch.Tensor | None,
    p: torch.Tensor,
    lengths: torch.Tensor,
    uniforms: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Judge one step's drafts of every row.

    Args:
        draft_tokens: ``[B, k]`` the drafts (row ``b``'s first ``lengths[b]`` are real).
        q: ``[B, k, V]`` the draft's probabilities at the drafted positions, or None when
            every proposal is one-hot (``q(x) = 1`` at the proposed token).
        p: ``[B, k + 1, V]`` the target's probabilities at the same positions plus one more
            (row ``b``'s real ones are its first ``lengths[b] + 1``).
        lengths: ``[B]`` int64, each row's proposal length ``m_b`` in ``0..k``.
        uniforms: ``[B, k + 1]`` each row's uniforms in [0, 1): ``uniforms[b, i]`` tests
            draft ``i`` (``i < m_b``), ``uniforms[b, m_b]`` draws the next token.

    Returns:
        ``(n_accepted [B], next_token [B])``, int64 on the device: row ``b`` keeps its first
        ``n_accepted[b]`` drafts and ``next_token[b]`` follows them.
    """
    batch, k = draft_tokens.shape
    rows = torch.arange(batch, device=p.device)
    proposed = torch.arange(k, device=p.device) < lengths[:, None]  # [B, k]
    p_x = p[:, :k].gather(-1, draft_tokens[..., None]).squeeze(-1)  # p_i(x_i), [B, k]
    if q is None:
        accepted = uniforms[:, :k] < p_x
    else:
        q_x = q.gather(-1, draft_tokens[..., None]).squeeze(-1)  # q_i(x_i), [B, k]
        # u < p/q  <=>  u q < p  (no division, and q(x) = 0 < p(x) accepts)
        accepted = uniforms[:, :k] * q_x < p_x
    n = (accepted & proposed).long().cumprod(dim=1).sum(dim=1)  # accepted prefix, [B]

    # The next token's distribution: the residual at the first rejection, else p at m + 1.
    p_next = p[rows, n]  # [B, V]
    rejected = n < lengths  # [B]
    at = n.clamp(max=max(k - 1, 0))
    if k == 0:
        residual_rows = p_next
    elif q is None:
        x = draft_tokens[rows, at]  # the rejected token where there was one
        removed = p_next.scatter(1, x[:, None], 0.0)
        residual_rows = torch.where(rejected[:, None], removed, p_next)
    else:
        q_next = torch.where(rejected[:, None], q[rows, at], 0.0)
        residual_rows = (p_next - q_next).clamp_min_(0.0)
    # A residual of zero mass (p = q up to rounding: a rejection of probability ~0) is p.
    total = residual_rows.sum(dim=-1, keepdim=True)
    residual_rows = torch.where(total > 0, residual_rows, p_next)
    u_next = uniforms.gather(1, lengths[:, None]).squeeze(1)  # [B]
    return n, sample_with(residual_rows, u_next)


def verify_batch_greedy(
    draft_tokens: torch.Tensor, target_tokens: torch.Tensor, lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`verify_batch` at temperature 0, where ``p`` is one-hot: accept while the draft's
    token is the target's argmax; the next token is the target's argmax after the accepted
    prefix (the correction, or the bonus token). No random numbers.

    Args:
        draft_tokens: ``[B, k]``; row ``b``'s first ``lengths[b]`` are real.
        target_tokens: ``[B, k + 1]`` the target's argmax at the same positions plus one.
        lengths: ``[B]`` int64 proposal lengths.

    Returns:
        ``(n_accepted [B], next_token [B])`` int64 on the device.
    """
    k = draft_tokens.shape[1]
    proposed = torch.arange(k, device=draft_tokens.device) < lengths[:, None]
    matches = (draft_tokens == target_tokens[:, :k]) & proposed
    n = matches.long().cumprod(dim=1).sum(dim=1)
    return n, target_tokens.gather(1, n[:, None]).squeeze(1)
