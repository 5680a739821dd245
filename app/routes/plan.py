"""``GET /api/plan``: the draft length to speculate at each batch size, and vLLM's config.

The same hardware, model and alpha inputs as ``GET /api/roofline``, plus ``k_max`` and
``max_num_seqs``; the answer is the JSON of ``specscope plan --json``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, StringConstraints

from app.errors import error_responses
from app.params import SLIDERS
from app.plan import PLAN_NUMBERS, mix_domains
from app.setting_query import SettingQuery, number_query
from engine.analytic.schedule import MIX_MAX_DOMAINS, MIX_PATTERN, PlanError, single
from engine.serving.plan_cli import report, setting_costs

router = APIRouter(prefix="/api", tags=["plan"])
MixEntry = Annotated[str, StringConstraints(pattern=MIX_PATTERN)]


class PlanRange(BaseModel):
    lo: int = Field(description="first batch of the range")
    hi: int = Field(description="last batch of the range (inclusive)")
    k: int = Field(description="draft tokens per cycle in this range; 0: speculation off")
    speedup: list[float] = Field(description="lowest and highest speedup over speculation "
                                             "off across the range")
    vs_fixed: list[float] = Field(description="lowest and highest gain over the best fixed k")


class PlanDomain(BaseModel):
    name: str
    weight: float
    alpha: float
    first_speedup: float = Field(description="this domain's speedup at the first batch")
    loses_from: int | None = Field(description="the first batch at which the plan's k makes "
                                               "this domain slower than plain decoding")


class PlanBody(BaseModel):
    ranges: list[PlanRange]
    k_max: int
    k_max_used: int
    max_num_seqs: int
    largest_batch: int | None
    fixed_k: int = Field(description="the best single k over the planned batches")
    fixed_gain: float = Field(description="the plan over the best fixed k: geometric mean "
                                          "over the planned batches")
    domains: list[PlanDomain]
    limiting: str | None
    speculates: bool
    notices: list[str]


class PlanOut(BaseModel):
    """The schedule, vLLM's `speculative_config` for it (null when k is 0 at every batch:
    then `advice` says "do not speculate here"), and a Python snippet that starts vLLM."""

    costs: str
    target: str
    draft: str
    plan: PlanBody
    speculative_config: dict[str, Any] | None
    python: str | None
    advice: str | None
    notices: list[str]


@router.get("/plan", response_model=PlanOut, responses=error_responses(400, 422),
            summary="The k to speculate at each batch size, and vLLM's config for it")
def plan_api(
    setting: SettingQuery,
    alpha: Annotated[float, number_query("alpha", SLIDERS)] = SLIDERS["alpha"].default,
    k_max: Annotated[int, number_query("k_max", PLAN_NUMBERS)] = int(
        PLAN_NUMBERS["k_max"].default),
    max_num_seqs: Annotated[int, number_query("max_num_seqs", PLAN_NUMBERS)] = int(
        PLAN_NUMBERS["max_num_seqs"].default),
    mix: Annotated[list[MixEntry] | None, Query(
        max_length=MIX_MAX_DOMAINS,
        description="a traffic mix instead of alpha, one NAME:WEIGHT:ALPHA per domain "
                    "(repeat the parameter): throughput is the weighted mean of the expected "
                    "tokens per cycle, not that of the mean alpha")] = None,
) -> dict[str, Any]:
    """For every batch from 1 to `max_num_seqs`, the k in 0..`k_max` with the highest
    throughput speedup `S(B, k) = E_k / (k c(B) + v(B, k))` on the roofline model (k = 0 is
    speculation off), neighbours with the same k merged into vLLM's inclusive ranges
    (`num_speculative_tokens_per_batch_size`). Formulas: docs/design.md, "The batch-size
    schedule"."""
    domains, notices = mix_domains(mix) if mix else (single(alpha), [])
    try:
        return report(domains, setting_costs(setting), k_max, max_num_seqs, notices=notices)
    except PlanError as error:  # costs that are not finite: say so, never a 500
        return JSONResponse(status_code=422, content={
            "message": str(error), "detail": [{"loc": ["query"], "msg": str(error)}]})
