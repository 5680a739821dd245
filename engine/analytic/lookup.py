"""The slider model for a drafter whose cycles may propose nothing: prompt lookup (n-gram).

A draft model proposes ``k`` tokens every cycle. Prompt lookup proposes ``0..k``: with ``pi``
the share of cycles that have a proposal, a cycle with one yields ``E(T | proposal)`` tokens
for a verification pass (``v`` target steps), a cycle without one is a plain target step
(1 token, 1 step), and every cycle pays the lookup (``c`` target steps, once per cycle, not per
token)::

    S = [pi E(T | proposal) + (1 - pi)] / [pi v + (1 - pi) + c]

``E(T | proposal)`` is the i.i.d. model's ``(1 - alpha^(m+1)) / (1 - alpha)`` averaged over
the proposals' lengths ``m`` (all ``k`` unless the lengths are given). With ``pi = 1`` and
``c = k c_draft`` it is the draft model's speedup (:func:`engine.analytic.theory.speedup`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from engine.analytic.theory import (
    CURVE_MAX_K,
    TARGET,
    CurvePoint,
    Figures,
    baseline_tok_s,
    expected_accepted,
    expected_tokens,
    simulate_cycle,
    time_for_tokens_s,
    v_at,
)
from engine.analytic.theory import (
    accepted_sd as theory_accepted_sd,
)

# The n-gram bounds every prompt lookup here starts from (the engine's drafter, vLLM's through
# `specscope vllm serve --method ngram`, the page, the command line): chosen for the shipped
# pair's 4096-token vocabulary from the match rates measured on the built-in prompt sets
# (docs/design.md, "Prompt lookup"). vLLM's own default is min = max = 5
# (config/speculative.py), which a short context of a small vocabulary rarely matches.
PROMPT_LOOKUP_MIN = 2
PROMPT_LOOKUP_MAX = 4


def expected_tokens_given_proposal(
    alpha: float, k: int, lengths: Sequence[float] | None = None
) -> float:
    """``E(T | proposal)``: expected tokens of a cycle that proposed something.
    ``lengths[m]``: how many proposals had ``m`` tokens (m = 0..k; index 0 is ignored);
    None or no proposals: every proposal has ``k`` tokens."""
    if lengths is not None:
        weights = [(m, w) for m, w in enumerate(lengths) if m > 0 and w > 0]
        total = sum(w for _, w in weights)
        if total > 0:
            return sum(w * expected_tokens(alpha, m) for m, w in weights) / total
    return expected_tokens(alpha, k)


def tokens_per_cycle(
    alpha: float, k: int, pi: float, lengths: Sequence[float] | None = None
) -> float:
    """``pi E(T | proposal) + (1 - pi)``."""
    return pi * expected_tokens_given_proposal(alpha, k, lengths) + (1.0 - pi)


def cycle_cost(pi: float, c: float, v: float = 1.0) -> float:
    """``pi v + (1 - pi) + c`` target steps: a verification pass when there is a proposal,
    a plain target step when there is none, and the lookup every cycle."""
    return pi * v + (1.0 - pi) + c


def speedup(
    alpha: float, k: int, pi: float, c: float, v: float = 1.0,
    lengths: Sequence[float] | None = None,
) -> float:
    """Expected speedup over plain target decoding (see the module's docstring)."""
    return tokens_per_cycle(alpha, k, pi, lengths) / cycle_cost(pi, c, v)


def verification_cost_at(k: int, v: float, k_measured: int) -> float:
    """``v`` measured at ``k_measured`` carried to ``k``: linear in the verified positions,
    from 1 (one position: a plain target step) at ``k = 0``. On a memory-bound device ``v``
    stays near 1 at any small ``k``; on a CPU it grows with ``k``."""
    return 1.0 + (v - 1.0) * k / k_measured


def best_k(
    alpha: float, pi: float, c: float, v: float, k_measured: int, k_max: int = CURVE_MAX_K
) -> tuple[int, float]:
    """The ``k`` in ``1..k_max`` with the highest speedup, ``v`` carried from ``k_measured``
    (:func:`verification_cost_at`), ``pi`` and ``c`` as measured, and proposals taken as full
    ``k`` long (optimistic: a proposal stops where the context does); ties go to the smaller
    ``k``."""
    best = (0, 0.0)
    for k in range(1, k_max + 1):
        s = speedup(alpha, k, pi, c, verification_cost_at(k, v, k_measured))
        if s > best[1]:
            best = (k, s)
    return best


def figures(
    alpha: float, k: int, pi: float, c: float, v: float = 1.0, step_ms: float = 22.0,
    tokens: int = 500, v_by_k: tuple[float, ...] | None = None,
) -> Figures:
    """The slider page's figures for prompt lookup: :func:`engine.analytic.theory.figures`
    with a proposal in a share ``pi`` of cycles and ``c`` the lookup's cost per cycle. ``v`` is
    the verification pass's cost at every k (or ``v_by_k[k - 1]``), as on the draft model's
    page; the curve's proposals are all ``k`` long. Ties for the best k go to the smaller k."""
    curve = [
        CurvePoint(j, tokens_per_cycle(alpha, j, pi), cycle_cost(pi, c, v_at(j, v, v_by_k)),
                   speedup(alpha, j, pi, c, v_at(j, v, v_by_k)))
        for j in range(1, CURVE_MAX_K + 1)
    ]
    best = max(curve, key=lambda p: (p.speedup, -p.k))
    here = curve[k - 1]
    return Figures(
        alpha=alpha,
        k=k,
        c=c,
        v=v_at(k, v, v_by_k),
        step_ms=step_ms,
        tokens=tokens,
        expected_accepted=pi * expected_accepted(alpha, k),
        expected_tokens=here.expected_tokens,
        cycle_cost=here.cycle_cost,
        speedup=here.speedup,
        baseline_tok_s=baseline_tok_s(step_ms),
        spec_tok_s=baseline_tok_s(step_ms) * here.speedup,
        baseline_s=time_for_tokens_s(tokens, step_ms),
        spec_s=time_for_tokens_s(tokens, step_ms, here.speedup),
        best_k=best.k,
        best_speedup=best.speedup,
        curve=curve,
        pi=pi,
    )


def simulate_cycles(alpha: float, k: int, pi: float, n_cycles: int, seed: int) -> list[list[str]]:
    """``n_cycles`` simulated cycles: with probability ``pi`` a proposal of ``k`` tokens judged
    as the draft model's are (:func:`engine.analytic.theory.simulate_cycle`), else the target's
    own token alone. The same seed gives the same cycles."""
    rng = random.Random(seed)
    return [simulate_cycle(alpha, k, rng) if rng.random() < pi else [TARGET]
            for _ in range(n_cycles)]


def accepted_sd(alpha: float, k: int, pi: float) -> float:
    """Standard deviation of the drafts accepted in one cycle, ``B A`` with ``B`` a proposal
    (probability ``pi``) and ``A`` the draft model's accepted count:
    ``Var = pi E[A^2] - (pi E[A])^2``."""
    mean = expected_accepted(alpha, k)
    second = theory_accepted_sd(alpha, k) ** 2 + mean**2
    return max(pi * second - (pi * mean) ** 2, 0.0) ** 0.5
