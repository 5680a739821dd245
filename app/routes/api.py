"""JSON API over the analytic model."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from app.errors import error_responses
from app.params import LOOKUP_SLIDERS, SLIDERS
from engine.analytic import lookup
from engine.analytic.theory import CURVE_MAX_K, figures

router = APIRouter(prefix="/api", tags=["theory"])


def _query(name: str) -> Any:
    s = (SLIDERS | LOOKUP_SLIDERS)[name]
    return Query(ge=s.minimum, le=s.maximum,
                 description=f"{s.label}; {s.describe_range()}")


class CurvePoint(BaseModel):
    k: int = Field(ge=1, le=CURVE_MAX_K)
    expected_tokens: float = Field(description="1 + alpha + ... + alpha^k")
    cycle_cost: float = Field(
        description="k c + v (prompt lookup: pi v + 1 - pi + c), in target steps")
    speedup: float


class Theory(BaseModel):
    """The analytic model's figures for one setting (Leviathan et al., 2023)."""

    expected_accepted: float = Field(description="draft tokens accepted per cycle")
    expected_tokens: float = Field(description="tokens per cycle: accepted drafts + 1")
    cycle_cost: float = Field(
        description="k c + v (prompt lookup: pi v + 1 - pi + c), in target steps")
    speedup: float = Field(description="expected tokens / cycle cost")
    baseline_tok_s: float = Field(description="plain decoding: 1000 / step_ms")
    spec_tok_s: float = Field(description="speculative decoding: baseline_tok_s x speedup")
    baseline_s: float = Field(description="seconds for `tokens` tokens, plain decoding")
    spec_s: float = Field(description="seconds for `tokens` tokens, speculative decoding")
    best_k: int = Field(ge=1, le=CURVE_MAX_K, description="the fastest k (ties: the smaller)")
    best_speedup: float
    curve: list[CurvePoint] = Field(description=f"k = 1..{CURVE_MAX_K}")
    pi: float | None = Field(default=None, description="prompt lookup: the share of cycles with "
                             "a proposal (null for the draft model)")


@router.get("/theory", summary="Figures of the analytic model for one setting",
            responses=error_responses(400, 422))
def theory(
    alpha: Annotated[float, _query("alpha")] = SLIDERS["alpha"].default,
    k: Annotated[int, _query("k")] = int(SLIDERS["k"].default),
    c: Annotated[float, _query("c")] = SLIDERS["c"].default,
    v: Annotated[float, _query("v")] = SLIDERS["v"].default,
    step_ms: Annotated[float, _query("step_ms")] = SLIDERS["step_ms"].default,
    tokens: Annotated[int, _query("tokens")] = int(SLIDERS["tokens"].default),
    drafter: Annotated[Literal["model", "ngram"], Query(
        description="model: a draft model proposing k tokens a cycle, each draft step costing "
                    "c; ngram: prompt lookup, proposing in a share pi of cycles, its lookup "
                    "costing c once a cycle")] = "model",
    pi: Annotated[float, _query("pi")] = LOOKUP_SLIDERS["pi"].default,
) -> Theory:
    """Expected tokens per cycle, cycle cost, speedup, rates, times and the best k,
    with the speedup curve over k = 1..16. Formulas: Leviathan et al. (2023); for prompt
    lookup S = [pi E(T | proposal) + (1 - pi)] / [pi v + (1 - pi) + c] (docs/design.md)."""
    if drafter == "ngram":
        return Theory.model_validate(asdict(lookup.figures(alpha, k, pi, c, v, step_ms, tokens)))
    return Theory.model_validate(asdict(figures(alpha, k, c, v, step_ms, tokens)))
