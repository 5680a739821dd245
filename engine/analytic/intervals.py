"""How far to trust a prediction: an 80 % interval from the held-out residuals of series like
it (standard library only).

A held-out point's residual is ``r = ln(model / measured)``, a rate's (a step time counts as its
inverse, tokens per second). Over the held-out points of one kind of figure (speedups; the
plain decode speed), the 10th and 90th
percentiles ``q10`` and ``q90`` of ``r`` bound where the measured value fell around the model's:
a new prediction ``m`` carries the interval ``[m e^-q90, m e^-q10]``. Where the model ran 30 %
high on the held-out points, the truth may be 30 % lower here; the interval need not contain
``m`` when the model was biased on every held-out point.

Whether about 80 % of held-out points fall inside is checked, not assumed: each point is left
out in turn, the interval is built from the others, and the point is inside or not. The count,
``n`` and the Wilson 95 % interval of the coverage are reported, since 20 or 30 points cannot
pin it closer.

Speedups take every held-out speedup series, the published GPU ones and this project's own CPU
sweeps together: too few GPU speedups are published with what the model needs (5 points, all
MagicDec's) to stand alone, and both are speedups the model predicts from the same formulas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

LEVEL = 0.8
KINDS = {"speedup": ("speedup",), "speed": ("tokens_per_s_per_sequence", "tpot_ms")}
"""Each kind of figure and the held-out quantities whose residuals it takes."""
INVERSE = frozenset({"tpot_ms"})
"""Quantities that are times: their residual is taken of the rate, ``ln(measured / model)``."""


@dataclass(frozen=True)
class Interval:
    """Factors on the model's value (``low <= high``), the held-out points they rest on, and
    their leave-one-out coverage (``inside`` of ``n``, Wilson 95 % ``coverage``)."""

    kind: str
    low: float
    high: float
    n: int
    inside: int
    coverage: tuple[float, float]

    def of(self, value: float) -> tuple[float, float]:
        return value * self.low, value * self.high

    def describe(self) -> str:
        lo, hi = self.coverage
        return (f"{LEVEL:.0%} interval from the residuals of {self.n} held-out {self.kind} "
                f"points (specscope validate); left out in turn, {self.inside} of {self.n} "
                f"fell inside their own ({lo:.0%}-{hi:.0%} at 95 %)")


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values``, linear between order statistics."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("a quantile needs at least one value")
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def wilson(inside: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``inside / n``."""
    if n == 0:
        return 0.0, 1.0
    p = inside / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _bounds(residuals: Sequence[float]) -> tuple[float, float]:
    tail = (1 - LEVEL) / 2
    return quantile(residuals, tail), quantile(residuals, 1 - tail)


def interval(residuals: Sequence[float], kind: str) -> Interval:
    """The interval of ``residuals`` (``ln(model / measured)``) and its leave-one-out
    coverage."""
    if len(residuals) < 3:
        raise ValueError(f"an interval needs at least 3 held-out {kind} points "
                         f"(got {len(residuals)})")
    q_low, q_high = _bounds(residuals)
    inside = 0
    for i, r in enumerate(residuals):
        lo, hi = _bounds([x for j, x in enumerate(residuals) if j != i])
        inside += lo <= r <= hi
    return Interval(kind, math.exp(-q_high), math.exp(-q_low), len(residuals), inside,
                    wilson(inside, len(residuals)))


def residuals_of(series, kind: str) -> list[float]:
    """``ln(model / measured)`` of every held-out point of ``kind`` in ``series``
    (:class:`engine.analytic.validate.SeriesResult` s), of the rate for a time."""
    return [math.log(p.model / p.measured) * (-1 if s.quantity in INVERSE else 1)
            for s in series if s.split == "held_out" and s.quantity in KINDS[kind]
            for p in s.points if p.model > 0 and p.measured > 0]
