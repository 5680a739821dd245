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

from dataclasses import dataclass

SURVIVAL, CONDITIONAL = "survival", "conditional"
SEQUENTIAL, ONE_PASS = "sequential", "pass"
SHAPES = {SEQUENTIAL: "sequential: k c (a draft pass a token)",
          ONE_PASS: "one pass: c0 + k c (a fixed part, then a head a position)"}
MAX_POSITIONS = 16


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
