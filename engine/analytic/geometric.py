"""How far counted cycles depart from independent acceptance (docs/design.md, "The estimators").

The slider model takes every draft position to be accepted independently with probability
alpha, so a cycle that proposed ``m`` tokens accepts ``a`` of them with the truncated geometric
probability ``alpha^a (1 - alpha)`` for ``a < m`` and ``alpha^m`` for ``a = m``. Real drafts
are correlated: one that has gone wrong tends to stay wrong, so cycles accept all or nothing
more often than that, and the tokens a cycle yields fall below the model's ``E(T)``.

- :func:`tokens_per_cycle`: the tokens per cycle the measured histogram gives (``a + 1`` for a
  cycle that accepted ``a``, 1 for one with no proposal), the figure that takes the place of
  ``E(T)`` when the model's independence is dropped.
- :func:`geometric_fit`: Pearson's chi-square of the counted cycles against the truncated
  geometric at the counted alpha, cell by cell (proposal length ``m``, accepted ``a``), with
  ``df = sum over the lengths m of m, minus 1`` for the fitted alpha (``k - 1`` when every
  cycle proposed ``k``), and its p-value. The test takes the cycles as independent draws;
  consecutive cycles of one text are not quite, so a small p says "not geometric", not how
  unlikely the run was.

Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.analytic.theory import acceptance_length_pmf

# Below this expected count a cell's chi-square term is unreliable (the usual rule of thumb).
SPARSE_EXPECTED = 5.0


def tokens_per_cycle(histogram: Sequence[int], without_proposal: int = 0) -> float | None:
    """Mean tokens a cycle yielded: ``histogram[a]`` cycles with a proposal accepted ``a``
    drafts and yielded ``a + 1`` tokens; ``without_proposal`` cycles yielded 1 each. None
    without cycles."""
    cycles = sum(histogram) + without_proposal
    if cycles == 0:
        return None
    return (sum((a + 1) * n for a, n in enumerate(histogram)) + without_proposal) / cycles


def length_shares(alpha: float, lengths: Sequence[int]) -> list[float]:
    """The truncated geometric's share of cycles accepting ``a = 0..k`` drafts, over cycles
    whose proposals had the lengths counted in ``lengths`` (``lengths[m]`` proposals of ``m``
    tokens, ``m = 1..k``; index 0 is ignored): a mixture of :func:`acceptance_length_pmf`.
    All zeros without a proposal."""
    k = len(lengths) - 1
    shares = [0.0] * (k + 1)
    total = sum(lengths[1:])
    for m in range(1, k + 1):
        for a, p in enumerate(acceptance_length_pmf(alpha, m)):
            shares[a] += lengths[m] * p / total if total else 0.0
    return shares


@dataclass(frozen=True)
class GeometricFit:
    """Pearson's chi-square of counted cycles against the truncated geometric at alpha."""

    chi2: float
    df: int
    p_value: float
    cycles: int  # with a proposal
    smallest_expected: float  # the smallest expected count of a cell (< 5: the test is rough)


def geometric_fit(cycles: Iterable[tuple[int, int]], alpha: float | None) -> GeometricFit | None:
    """The fit of cycles given as ``(proposed, accepted)`` (those with no proposal are left
    out: they hold no acceptance) at ``alpha``, usually the counted alpha of the same cycles.
    None when there is nothing to test: no alpha, or fewer than one degree of freedom (every
    proposal one token long, or none)."""
    if alpha is None:
        return None
    observed: dict[tuple[int, int], int] = {}
    by_length: dict[int, int] = {}
    for proposed, accepted in cycles:
        if proposed > 0:
            observed[proposed, accepted] = observed.get((proposed, accepted), 0) + 1
            by_length[proposed] = by_length.get(proposed, 0) + 1
    df = sum(by_length.keys()) - 1  # m - 1 free shares per length m, less the fitted alpha
    if df < 1:
        return None
    chi2, smallest = 0.0, math.inf
    for m, n in by_length.items():
        for a, p in enumerate(acceptance_length_pmf(alpha, m)):
            expected, seen = n * p, observed.get((m, a), 0)
            if expected > 0:
                chi2 += (seen - expected) ** 2 / expected
                smallest = min(smallest, expected)
            elif seen:  # a count the model calls impossible (alpha 0 or 1): no fit at all
                chi2 = math.inf
    return GeometricFit(chi2, df, chi2_survival(chi2, df), sum(by_length.values()), smallest)


def chi2_survival(x: float, df: int) -> float:
    """P(X >= x) for X chi-square with ``df`` degrees of freedom: the regularized upper
    incomplete gamma function Q(df / 2, x / 2)."""
    if df < 1:
        raise ValueError(f"a chi-square needs at least one degree of freedom, got {df}")
    if x <= 0:
        return 1.0
    if math.isinf(x):
        return 0.0
    return _upper_gamma(df / 2, x / 2)


def _upper_gamma(s: float, x: float) -> float:
    """Q(s, x): a series for P below s + 1, a continued fraction (Lentz) for Q above
    (Numerical Recipes, 6.2); each converges fast where it is used."""
    log_front = s * math.log(x) - x - math.lgamma(s)
    if x < s + 1:
        term = total = 1.0 / s
        n = s
        while abs(term) > abs(total) * 1e-15:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1 - s
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - s)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        step = d * c
        h *= step
        if abs(step - 1) < 1e-15:
            break
    return math.exp(log_front) * h
