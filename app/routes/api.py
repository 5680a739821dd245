"""JSON API over the analytic model."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query

from app.params import SLIDERS
from engine.analytic.theory import figures

router = APIRouter(prefix="/api", tags=["theory"])


def _query(name: str) -> Any:
    s = SLIDERS[name]
    return Query(ge=s.minimum, le=s.maximum, description=f"{s.label}; {s.describe_range()}")


@router.get("/theory", summary="Figures of the analytic model for one setting")
def theory(
    alpha: Annotated[float, _query("alpha")] = SLIDERS["alpha"].default,
    k: Annotated[int, _query("k")] = int(SLIDERS["k"].default),
    c: Annotated[float, _query("c")] = SLIDERS["c"].default,
    v: Annotated[float, _query("v")] = SLIDERS["v"].default,
    step_ms: Annotated[float, _query("step_ms")] = SLIDERS["step_ms"].default,
    tokens: Annotated[int, _query("tokens")] = int(SLIDERS["tokens"].default),
) -> dict[str, Any]:
    """Expected tokens per cycle, cycle cost, speedup, rates, times and the best k,
    with the speedup curve over k = 1..16. Formulas: Leviathan et al. (2023)."""
    result = asdict(figures(alpha, k, c, v, step_ms, tokens))
    for echoed in ("alpha", "k", "c", "v", "step_ms", "tokens"):
        result.pop(echoed)
    return result
