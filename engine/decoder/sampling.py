"""Turning logits into the distributions ``p`` and ``q``, and drawing tokens from them.

Both models' logits go through the same :func:`warp` (temperature, then top-k, then top-p),
so the verification rule compares like with like. Temperature 0 is greedy decoding,
represented as a one-hot distribution on the argmax: fed to the rejection rule, one-hot
``p`` and ``q`` reduce it exactly to "accept while the draft's token is the target's argmax".
Any temperature below ``GREEDY_BELOW`` is greedy too: dividing logits by 1e-38 overflows
float32 to infinity (and the softmax to NaN), and far above that the distribution is already
one-hot.

Shapes: ``logits`` is ``[..., V]``; every function keeps the leading dimensions.
"""

from __future__ import annotations

import torch

from engine.decoder.events import GREEDY_BELOW


def warp(
    logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0
) -> torch.Tensor:
    """Probabilities ``[..., V]`` (float32, rows sum to 1) from logits ``[..., V]``.

    ``top_k = 0`` and ``top_p = 1`` switch those filters off.
    """
    logits = logits.float()
    if temperature < GREEDY_BELOW:
        return greedy(logits)
    logits = logits / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p < 1.0:
        probs = _top_p(probs, top_p)
    return probs


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """One-hot ``[..., V]`` on the argmax of ``logits [..., V]``; a row whose logits hold NaN
    or +infinity is all NaN, so that :func:`check_finite` catches a model fault on the greedy
    path as it does on the sampled one (argmax alone would pick a NaN as the winner)."""
    probs = torch.zeros_like(logits, dtype=torch.float32)
    winner = logits.argmax(dim=-1, keepdim=True)
    probs.scatter_(-1, winner, 1.0)
    # argmax picks a NaN or +inf where a row has one, so checking the winner checks the row
    broken = ~torch.isfinite(logits.gather(-1, winner))
    return probs.masked_fill_(broken, float("nan"))


def _top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches ``top_p``; renormalise."""
    sorted_p, order = torch.sort(probs, dim=-1, descending=True)
    # A token survives when the mass strictly before it is still short of top_p; the most
    # likely token always survives, however small top_p is (1e-46 is 0 in float32).
    drop = (sorted_p.cumsum(dim=-1) - sorted_p) >= top_p
    drop[..., 0] = False
    sorted_p = sorted_p.masked_fill(drop, 0.0)
    kept = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
    return kept / kept.sum(dim=-1, keepdim=True)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token id per row of ``probs [..., V]``, shape ``[...]`` (int64, same device): one
    uniform per row from ``generator``, through :func:`sample_with`."""
    u = torch.rand(probs.shape[:-1], generator=generator, device=probs.device,
                   dtype=probs.dtype)
    return sample_with(probs, u)


def sample_with(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The token of each row of ``probs [..., V]`` that the uniform ``u [...]`` in [0, 1)
    picks, ``[...]`` int64.

    Inverse-transform sampling: with the running sums ``F`` of a row, the first ``x`` with
    ``F(x) >= (1 - u) F(V)`` has probability ``probs[x] / sum(probs)``. It needs one uniform
    per row (drawing ``V`` exponentials costs ~10x more on a CPU), no normalisation and,
    unlike ``torch.multinomial``, no host synchronisation. A token of probability 0 is never
    picked: its ``F`` equals its predecessor's, and ``(1 - u) F(V) > 0``.
    """
    cdf = probs.cumsum(dim=-1)
    threshold = (1.0 - u.to(cdf.dtype))[..., None] * cdf[..., -1:]  # in (0, F(V)]
    # Rows that are not finite (a faulty model) find no x; keep the index a valid id, and
    # let the caller's finiteness check, where it reads the results anyway, report it.
    return torch.searchsorted(cdf, threshold).squeeze(-1).clamp_(max=probs.shape[-1] - 1)


def row_uniforms(generators: list[torch.Generator], counts: list[int], width: int,
                 device: torch.device) -> torch.Tensor:
    """``[B, width]`` uniforms in [0, 1): row ``b`` draws ``counts[b]`` of them with
    ``generators[b]`` (one call per row, as vLLM loops over seeded requests), so a row's draws
    never depend on the rows beside it; the rest of a row is 0."""
    draws = [torch.rand(n, generator=g, device=device)
             for g, n in zip(generators, counts, strict=True)]
    u = torch.nn.utils.rnn.pad_sequence(draws, batch_first=True)
    if u.shape[1] < width:
        u = torch.nn.functional.pad(u, (0, width - u.shape[1]))
    return u


def check_finite(*probs: torch.Tensor) -> None:
    """Raise ``ValueError`` when a distribution holds NaN or infinity (a model fault, such as
    an overflow in half precision); one host synchronisation."""
    if not all(bool(torch.isfinite(p).all()) for p in probs):
        raise ValueError(
            "the model produced probabilities that are not finite numbers (NaN or infinity); "
            "try another temperature or a full-precision dtype"
        )
