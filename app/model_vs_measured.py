"""Where a measured curve drawn on the batch chart and the model disagree.

The chart draws the model at the section's alpha and k; a measured curve ran at its own k
(a schedule's k at each batch) and counted its own alpha. So each measured point is held
against the model at the curve's k and alpha in the section's setting, and a point where the
two differ by more than :data:`LIMIT` of the measured speedup is said in words beside the
chart: "measured 0.67× at batch 64, the model 1.20×".
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.analytic.break_even import speedup_at
from engine.analytic.passes import Setting
from engine.measure.curves import MeasuredCurve

LIMIT = 0.20  # |model - measured| / measured above which a batch is named


@dataclass(frozen=True)
class Disagreement:
    batch: int
    k: int
    measured: float
    model: float

    @property
    def error(self) -> float:
        """``(model - measured) / measured``."""
        return (self.model - self.measured) / self.measured

    def words(self, with_k: bool = False) -> str:
        at = f"batch {self.batch} (k = {self.k})" if with_k else f"batch {self.batch}"
        return f"measured {self.measured:.2f}× at {at}, the model {self.model:.2f}×"


@dataclass(frozen=True)
class CurveDisagreement:
    curve: str  # the curve's name in the chart's legend
    alpha: float
    points: tuple[Disagreement, ...]
    compared: int  # batches compared (those drawn whose k is known)
    scheduled: bool  # k changes with the batch: each batch says its k

    @property
    def words(self) -> str:
        return "; ".join(p.words(self.scheduled) for p in self.points)


def model_speedup(s: Setting, curve: MeasuredCurve, batch: int) -> tuple[int, float] | None:
    """The curve's k at ``batch`` and the model's speedup there at the curve's alpha (1× at
    k = 0, plain decoding); None where the curve's schedule does not say its k."""
    k = curve.k_at(batch)
    if k is None:
        return None
    return k, 1.0 if k == 0 else speedup_at(replace(s, alpha=curve.alpha, k=k), batch)


def disagreements(s: Setting, curves: list[MeasuredCurve], shown_up_to: int,
                  limit: float = LIMIT) -> list[CurveDisagreement]:
    """One entry per drawn curve that the model misses by more than ``limit`` at some batch
    (batches 1 to ``shown_up_to``, those the chart draws), naming every such batch."""
    found = []
    for c in curves:
        missed, compared = [], 0
        for p in c.points:
            priced = model_speedup(s, c, p.batch) if 1 <= p.batch <= shown_up_to else None
            if priced is None:
                continue
            compared += 1
            d = Disagreement(p.batch, priced[0], p.speedup, priced[1])
            if abs(d.error) > limit:
                missed.append(d)
        if missed:
            found.append(CurveDisagreement(c.policy or c.label, c.alpha, tuple(missed),
                                           compared, bool(c.schedule)))
    return found

