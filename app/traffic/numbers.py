""""Use these numbers": a measured row (a probe's, a calibration's) as slider values and
the link that sets them."""

from __future__ import annotations

from urllib.parse import urlencode

from app.params import SLIDERS
from engine.analytic import positions
from engine.measure.probe import ProbeRow
from engine.serving.calibrate import Calibration


def use_numbers_query(alpha: float, k: int, c: float | None = None, v: float | None = None,
                      step_ms: float | None = None) -> dict[str, str]:
    """Slider values for a measured row, clamped into the sliders' ranges."""
    formats = {"alpha": "{:.2f}", "k": "{:d}", "c": "{:.2f}", "v": "{:.2f}", "step_ms": "{:.1f}"}
    given = {"alpha": alpha, "k": k, "c": c, "v": v, "step_ms": step_ms}
    values = {}
    for name, value in given.items():
        if value is not None:
            s = SLIDERS[name]
            clamped = min(max(value, s.minimum), s.maximum)
            values[name] = formats[name].format(int(clamped) if s.integer else clamped)
    return values


def by_position(rates: list[float | None]) -> dict[str, str]:
    """A measured acceptance by position (survival rates) as the slider's ``positions``, or
    nothing where a position was not measured."""
    curve = positions.measured(rates)
    return {} if curve is None else {"positions": ",".join(f"{s:.3g}" for s in curve)}


def row_numbers(row: ProbeRow) -> dict[str, str]:
    """A probe row's numbers, with the slider model's drafter preset and its acceptance by
    position; prompt lookup's row brings pi, its share of cycles with a proposal, instead."""
    values = use_numbers_query(row.alpha_counted, row.k, row.c, row.v, row.step_ms)
    if row.drafter == "ngram":
        return values | {"preset": "ngram", "pi": f"{min(max(row.proposal_share, 0.0), 1.0):.2f}"}
    return values | {"preset": row.drafter} | by_position(row.per_position_acceptance)


def href(values: dict[str, str]) -> str:
    return "/?" + urlencode(values)


def calibration_numbers(calibration: Calibration) -> list[dict[str, str]]:
    return [use_numbers_query(r.alpha_counted, r.k) | by_position(r.per_position_acceptance)
            for r in calibration.rows]
