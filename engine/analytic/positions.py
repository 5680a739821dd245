"""Acceptance by position: the model when a draft's i-th token is accepted with its own rate,
not one alpha at every position (pure Python).

A drafter's acceptance is measured as **survival rates** ``s_i``: the share of drafts whose
first i tokens were all accepted (vLLM's per-position counters over its drafts; the engine's
cycles alike). The **conditional rate** at position i is ``a_i = s_i / s_{i-1}`` (``s_0 =
1``): the chance that token i is accepted once tokens 1..i-1 were. Under the i.i.d. model every
``a_i`` is alpha and ``s_i = alpha^i``. Medusa heads guess token i without seeing tokens
1..i-1, so their ``a_i`` fall with i; a draft model's stay near alpha.

    tokens a cycle at k = 1 + s_1 + ... + s_k
    draft cost at k     = k c          (sequential: a draft pass a token)
                        = c0 + k c     (one pass: a fixed part, then a head a position)

Past the last measured position the last conditional rate is assumed to hold (a curve
measured at k = 2 says nothing of position 3); :func:`extended` says so by returning where the
measurement ends. A curve is measured at one k: vLLM's position-1 rate differs between k = 4
and k = 2 on the same traffic, so a curve is used as measured, not refitted across k.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from engine.analytic import theory
from engine.analytic.theory import (
    ACCEPTED,
    CURVE_MAX_K,
    DISCARDED,
    REJECTED,
    TARGET,
    CurvePoint,
    Figures,
    baseline_tok_s,
    time_for_tokens_s,
)

SURVIVAL, CONDITIONAL = "survival", "conditional"
SEQUENTIAL, ONE_PASS = "sequential", "pass"
SHAPES = {SEQUENTIAL: "sequential: k c", ONE_PASS: "one pass: c0 + k c"}
"""The draft's cost shapes: a draft pass a token, or one pass with a fixed part and a head a
position (Medusa heads)."""
MAX_POSITIONS = 16
# Rates as a link, the API and the command line write them: 1 to 16 numbers from 0 to 1,
# commas between (that they fall is checked when they are read).
_RATE = r"(0(\.[0-9]{1,6})?|1(\.0{1,6})?)"
POSITIONS_PATTERN = rf"^\s*{_RATE}(\s*,\s*{_RATE}){{0,15}}\s*$"


class CurveError(ValueError):
    """Rates that are not an acceptance curve; says why."""


def conditional_from_survival(survival: list[float]) -> list[float]:
    """``a_i = s_i / s_{i-1}``; a position after a survival of 0 keeps rate 0."""
    out, before = [], 1.0
    for s in survival:
        out.append(s / before if before > 0 else 0.0)
        before = s
    return out


def survival_from_conditional(conditional: list[float]) -> list[float]:
    """``s_i = a_1 ... a_i``."""
    out, s = [], 1.0
    for a in conditional:
        s *= a
        out.append(s)
    return out


def iid(alpha: float, k: int) -> list[float]:
    """The i.i.d. model's survival rates ``alpha^i``, i = 1..k."""
    return [alpha**i for i in range(1, k + 1)]


@dataclass(frozen=True)
class Curve:
    """Survival rates ``s_1 .. s_n`` (non-increasing, each in 0..1) and where they came
    from (``source``: typed, a live run, a probe, vLLM's counters)."""

    survival: tuple[float, ...]
    source: str = "typed"

    @classmethod
    def of(cls, rates: list[float], kind: str = SURVIVAL, source: str = "typed") -> Curve:
        """A curve from survival or conditional rates; CurveError for rates that are not."""
        if kind not in (SURVIVAL, CONDITIONAL):
            raise CurveError(f"rates are {SURVIVAL} or {CONDITIONAL}, not {kind!r}")
        if not 1 <= len(rates) <= MAX_POSITIONS:
            raise CurveError(f"give 1 to {MAX_POSITIONS} rates, one a position (got "
                             f"{len(rates)})")
        for i, r in enumerate(rates, 1):
            if not 0.0 <= r <= 1.0:
                raise CurveError(f"the rate at position {i} is {r:g}: a rate is 0..1")
        survival = rates if kind == SURVIVAL else survival_from_conditional(rates)
        for i in range(1, len(survival)):
            if survival[i] > survival[i - 1] + 1e-12:
                raise CurveError(f"survival rates cannot rise: position {i + 1} "
                                 f"({survival[i]:g}) is above position {i} "
                                 f"({survival[i - 1]:g}); were conditional rates meant?")
        return cls(tuple(survival), source)

    @property
    def conditional(self) -> list[float]:
        return conditional_from_survival(list(self.survival))

    @property
    def measured(self) -> int:
        """Positions measured."""
        return len(self.survival)

    def extended(self, k: int) -> list[float]:
        """``s_1 .. s_k``; past the measured positions, the last conditional rate holds."""
        s = list(self.survival[:k])
        last = self.conditional[-1]
        while len(s) < k:
            s.append(s[-1] * last)
        return s

    def alpha_iid(self) -> float:
        """The one alpha with the same tokens a cycle at the measured k (bisection)."""
        target = 1.0 + sum(self.survival)
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if 1.0 + sum(iid(mid, self.measured)) < target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2


def tokens_per_cycle(curve: Curve, k: int) -> float:
    return 1.0 + sum(curve.extended(k))


def draft_cost(k: int, c: float, shape: str = SEQUENTIAL, c0: float = 0.0) -> float:
    """The draft's cost of a cycle in target steps: ``k c``, or ``c0 + k c`` for one pass (no
    draft at k = 0)."""
    if k == 0:
        return 0.0
    return k * c + (c0 if shape == ONE_PASS else 0.0)


def speedup(curve: Curve, k: int, c: float, v: float = 1.0, shape: str = SEQUENTIAL,
            c0: float = 0.0) -> float:
    return tokens_per_cycle(curve, k) / (draft_cost(k, c, shape, c0) + v)


def best_k(curve: Curve, c: float, v: float = 1.0, k_max: int = MAX_POSITIONS,
           shape: str = SEQUENTIAL, c0: float = 0.0,
           v_by_k: tuple[float, ...] | None = None) -> tuple[int, float]:
    """The k in 1..k_max with the highest speedup on this curve; ties go to the smaller k."""
    best = (1, -1.0)
    for k in range(1, k_max + 1):
        s = speedup(curve, k, c, v if v_by_k is None else v_by_k[k - 1], shape, c0)
        if s > best[1] + 1e-12:
            best = (k, s)
    return best


def figures(curve: Curve | None, alpha: float, k: int, c: float, v: float = 1.0,
            step_ms: float = 22.0, tokens: int = 500, v_by_k: tuple[float, ...] | None = None,
            shape: str = SEQUENTIAL, c0: float = 0.0) -> Figures:
    """The slider page's figures on a per-position ``curve`` (None: the i.i.d. curve at
    ``alpha``) and a cost shape, with the i.i.d. model's curve at ``alpha`` (same costs)
    beside it. Ties for the best k go to the smaller k."""
    curve = curve or Curve(tuple(iid(alpha, CURVE_MAX_K)), "i.i.d.")
    same = Curve(tuple(iid(alpha, CURVE_MAX_K)), "i.i.d.")

    def points(on: Curve) -> list[CurvePoint]:
        out = []
        for j in range(1, CURVE_MAX_K + 1):
            cost = draft_cost(j, c, shape, c0) + theory.v_at(j, v, v_by_k)
            out.append(CurvePoint(j, tokens_per_cycle(on, j), cost,
                                  tokens_per_cycle(on, j) / cost))
        return out

    line = points(curve)
    best = max(line, key=lambda p: (p.speedup, -p.k))
    here = line[k - 1]
    return Figures(
        alpha=alpha, k=k, c=c, v=theory.v_at(k, v, v_by_k), step_ms=step_ms, tokens=tokens,
        expected_accepted=here.expected_tokens - 1.0, expected_tokens=here.expected_tokens,
        cycle_cost=here.cycle_cost, speedup=here.speedup,
        baseline_tok_s=baseline_tok_s(step_ms), spec_tok_s=baseline_tok_s(step_ms) * here.speedup,
        baseline_s=time_for_tokens_s(tokens, step_ms),
        spec_s=time_for_tokens_s(tokens, step_ms, here.speedup),
        best_k=best.k, best_speedup=best.speedup, curve=line,
        survival=curve.extended(k), measured_positions=curve.measured, iid_curve=points(same),
        shape=shape, c0=c0,
    )


def simulate_cycles(curve: Curve, k: int, n_cycles: int, seed: int) -> list[list[str]]:
    """``n_cycles`` cycles whose draft token i is accepted with the conditional rate ``a_i``
    once tokens 1..i-1 were; the same seed gives the same cycles."""
    rates = conditional_from_survival(curve.extended(k))
    rng = random.Random(seed)
    cycles = []
    for _ in range(n_cycles):
        kinds: list[str] = []
        for i, a in enumerate(rates):
            if rng.random() < a:
                kinds.append(ACCEPTED)
            else:
                kinds += [REJECTED] + [DISCARDED] * (k - i - 1)
                break
        cycles.append([*kinds, TARGET])
    return cycles


def accepted_sd(curve: Curve, k: int) -> float:
    """Standard deviation of the drafts accepted in one cycle: ``P(A >= i) = s_i``."""
    s = curve.extended(k)
    mean = sum(s)
    second = sum((2 * i - 1) * si for i, si in enumerate(s, 1))  # E[A^2] = sum (2i - 1) s_i
    return math.sqrt(max(second - mean * mean, 0.0))


def parse(text: str) -> Curve:
    """``"0.84,0.60,0.39"``: survival rates by position as written in a link, the API or on
    the command line; CurveError says what is wrong."""
    try:
        rates = [float(x) for x in text.replace(" ", ",").split(",") if x.strip()]
    except ValueError:
        raise CurveError("give numbers separated by commas, such as 0.84,0.60,0.39") from None
    return Curve.of(rates)


def text(curve: Curve) -> str:
    """The survival rates as :func:`parse` reads them."""
    return ",".join(f"{s:.4g}" for s in curve.survival)


def measured(rates: list[float | None] | None) -> tuple[float, ...] | None:
    """Measured per-position acceptance (survival rates, None where nothing was counted) as a
    curve's rates, or None when any position is missing or they are no curve."""
    if not rates or any(r is None for r in rates):
        return None
    try:
        return Curve.of([float(r) for r in rates]).survival
    except CurveError:
        return None
