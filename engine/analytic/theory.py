"""The analytic model of speculative decoding (Leviathan et al., 2023), in pure Python.

Every figure the page, the API and the tests show comes from here. Symbols follow docs/design.md:
``alpha`` per-token acceptance probability, ``k`` draft tokens per cycle, ``c`` cost of one
draft step and ``v`` cost of the verification pass, both in units of one target decode step.

Acceptance is modelled as i.i.d.: draft position ``i`` (1-based) survives with probability
``alpha**i``. Sums are used instead of the closed forms ``(1 - alpha**(k+1)) / (1 - alpha)``
because they are exact at ``alpha = 1`` and need no special case.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

# The draft lengths the model's curve and its best-k search span (the engine itself accepts
# up to engine.decoder.events.MAX_DRAFT_K).
CURVE_MAX_K = 16
ACCEPTED, REJECTED, DISCARDED, TARGET = "accepted", "rejected", "discarded", "target"
KINDS = (ACCEPTED, REJECTED, DISCARDED, TARGET)


def expected_accepted(alpha: float, k: int) -> float:
    """Expected draft tokens accepted per cycle: alpha (1 - alpha^k) / (1 - alpha)."""
    return sum(alpha**i for i in range(1, k + 1))


def expected_tokens(alpha: float, k: int) -> float:
    """Expected tokens emitted per cycle (accepted drafts + the target's own token)."""
    return 1.0 + expected_accepted(alpha, k)


def cycle_cost(k: int, c: float, v: float = 1.0) -> float:
    """Cost of one cycle in target decode steps: k draft steps plus one verification."""
    return k * c + v


def speedup(alpha: float, k: int, c: float, v: float = 1.0) -> float:
    """Expected wall-time speedup over plain target decoding."""
    return expected_tokens(alpha, k) / cycle_cost(k, c, v)


def v_at(k: int, v: float, v_by_k: tuple[float, ...] | None) -> float:
    """The verification cost at draft length ``k``: ``v_by_k[k - 1]`` when the cost depends on
    k (the batch section's v(B, k)), else the one ``v``."""
    return v if v_by_k is None else v_by_k[k - 1]


def best_k(alpha: float, c: float, v: float = 1.0, k_max: int = CURVE_MAX_K,
           v_by_k: tuple[float, ...] | None = None) -> tuple[int, float]:
    """The k in 1..k_max with the highest speedup; ties go to the smaller k. ``v_by_k``, when
    given, prices the verification of each k (``k_max`` values at least)."""
    best = (1, speedup(alpha, 1, c, v_at(1, v, v_by_k)))
    for k in range(2, k_max + 1):
        s = speedup(alpha, k, c, v_at(k, v, v_by_k))
        if s > best[1]:
            best = (k, s)
    return best


def baseline_tok_s(step_ms: float) -> float:
    """Tokens per second of plain target decoding."""
    return 1000.0 / step_ms


def time_for_tokens_s(tokens: int, step_ms: float, speedup_factor: float = 1.0) -> float:
    """Seconds to generate ``tokens`` tokens, optionally sped up by ``speedup_factor``."""
    return tokens * step_ms / 1000.0 / speedup_factor


def position_acceptance(alpha: float, k: int) -> list[float]:
    """Chance that draft position i (1-based, i = 1..k) is accepted: alpha^i."""
    return [alpha**i for i in range(1, k + 1)]


def acceptance_length_pmf(alpha: float, k: int) -> list[float]:
    """P(A = a) for a = 0..k, A the draft tokens accepted in one cycle (truncated geometric)."""
    return [alpha**a * (1.0 - alpha) for a in range(k)] + [alpha**k]


def accepted_sd(alpha: float, k: int) -> float:
    """Standard deviation of A, the drafts accepted in one cycle (truncated geometric): a
    mean over n simulated cycles moves by about this / sqrt(n)."""
    pmf = acceptance_length_pmf(alpha, k)
    mean = sum(a * p for a, p in enumerate(pmf))
    return math.sqrt(max(sum(a * a * p for a, p in enumerate(pmf)) - mean * mean, 0.0))


@dataclass(frozen=True)
class CurvePoint:
    k: int
    expected_tokens: float
    cycle_cost: float
    speedup: float


@dataclass(frozen=True)
class Figures:
    """Everything the slider page shows for one setting of the controls."""

    alpha: float
    k: int
    c: float
    v: float
    step_ms: float
    tokens: int
    expected_accepted: float
    expected_tokens: float
    cycle_cost: float
    speedup: float
    baseline_tok_s: float
    spec_tok_s: float
    baseline_s: float
    spec_s: float
    best_k: int
    best_speedup: float
    curve: list[CurvePoint]
    # Prompt lookup only (engine.analytic.lookup.figures): the share of cycles with a proposal.
    # None: a draft model, which proposes k tokens every cycle.
    pi: float | None = None
    # Acceptance by position (engine.analytic.positions.figures): the survival rates s_1..s_k
    # priced, the i.i.d. model's curve at alpha beside them, and the draft's cost shape.
    survival: list[float] | None = None
    measured_positions: int | None = None  # positions the curve measured; past them, assumed
    iid_curve: list[CurvePoint] | None = None
    shape: str = "sequential"
    c0: float = 0.0

    @property
    def worth_speculating(self) -> bool:
        """False when even the best k is no faster than plain decoding."""
        return self.best_speedup > 1.0

    @property
    def best_at_edge(self) -> bool:
        """The best k is the last k priced: a longer draft might be better still."""
        return self.worth_speculating and self.best_k == self.curve[-1].k


def figures(
    alpha: float, k: int, c: float, v: float = 1.0, step_ms: float = 22.0, tokens: int = 500,
    v_by_k: tuple[float, ...] | None = None,
) -> Figures:
    """Every figure of the slider page. ``v_by_k`` (v for k = 1..16) replaces the one ``v``
    when the verification cost depends on k, as it does at a batch size."""
    v = v_at(k, v, v_by_k)
    s = speedup(alpha, k, c, v)
    k_best, s_best = best_k(alpha, c, v, v_by_k=v_by_k)
    curve = [
        CurvePoint(j, expected_tokens(alpha, j), cycle_cost(j, c, v_at(j, v, v_by_k)),
                   speedup(alpha, j, c, v_at(j, v, v_by_k)))
        for j in range(1, CURVE_MAX_K + 1)
    ]
    return Figures(
        alpha=alpha,
        k=k,
        c=c,
        v=v,
        step_ms=step_ms,
        tokens=tokens,
        expected_accepted=expected_accepted(alpha, k),
        expected_tokens=expected_tokens(alpha, k),
        cycle_cost=cycle_cost(k, c, v),
        speedup=s,
        baseline_tok_s=baseline_tok_s(step_ms),
        spec_tok_s=baseline_tok_s(step_ms) * s,
        baseline_s=time_for_tokens_s(tokens, step_ms),
        spec_s=time_for_tokens_s(tokens, step_ms, s),
        best_k=k_best,
        best_speedup=s_best,
        curve=curve,
    )


def simulate_cycle(alpha: float, k: int, rng: random.Random) -> list[str]:
    """One cycle's token kinds: accepted drafts, then at most one rejected draft and the
    discarded rest, then always the target's own token (correction or bonus)."""
    kinds: list[str] = []
    for i in range(k):
        if rng.random() < alpha:
            kinds.append(ACCEPTED)
        else:
            kinds.append(REJECTED)
            kinds.extend([DISCARDED] * (k - i - 1))
            break
    kinds.append(TARGET)
    return kinds


def simulate_cycles(alpha: float, k: int, n_cycles: int, seed: int) -> list[list[str]]:
    """``n_cycles`` simulated cycles; the same seed gives the same cycles."""
    rng = random.Random(seed)
    return [simulate_cycle(alpha, k, rng) for _ in range(n_cycles)]
