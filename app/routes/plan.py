"""``GET /api/plan``: the draft length to speculate at each batch size, and vLLM's config.

The same hardware, model and alpha inputs as ``GET /api/roofline``, plus ``k_max`` and
``max_num_seqs``; the answer is the JSON of ``specscope plan --json``."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, StringConstraints

from app.errors import error_responses
from app.measurements import measurement_store
from app.params import SLIDERS
from app.plan import PLAN_NUMBERS, mix_domains
from app.roofline import NUMBERS, hardware_for
from app.routes.roofline import (
    DEFAULT_DTYPE,
    DEFAULT_HARDWARE,
    DEFAULT_PAIR,
    DTYPE_HELP,
    HARDWARE_HELP,
    PAIR_HELP,
    Billions,
    Count,
    Dtype,
    HardwareName,
    PairName,
    _edited,
    _number,
)
from engine.analytic.roofline import DTYPES, PAIRS, Setting
from engine.analytic.schedule import MIX_MAX_DOMAINS, MIX_PATTERN, PlanError, single
from engine.measure.plan_cli import report, setting_costs

router = APIRouter(prefix="/api", tags=["plan"])
# Narrower than /api/roofline's: with at least 1 MB/s and 1 MFLOP/s every pass time is finite.
Rate = Annotated[float | None, Query(ge=1e-6, le=1_000_000)]
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


def _plan_number(name: str) -> Any:
    s = PLAN_NUMBERS[name]
    return Query(ge=s.minimum, le=s.maximum, description=f"{s.label}; {s.describe_range()}")


@router.get("/plan", response_model=PlanOut, responses=error_responses(400, 422),
            summary="The k to speculate at each batch size, and vLLM's config for it")
def plan_api(
    request: Request,
    hardware: Annotated[HardwareName, Query(description=HARDWARE_HELP)] = DEFAULT_HARDWARE,
    pair: Annotated[PairName, Query(description=PAIR_HELP)] = DEFAULT_PAIR,
    dtype: Annotated[Dtype, Query(description=DTYPE_HELP)] = DEFAULT_DTYPE,
    gpus: Annotated[int, _number("gpus", NUMBERS)] = 1,
    context: Annotated[int, _number("context", NUMBERS)] = int(NUMBERS["context"].default),
    alpha: Annotated[float, _number("alpha", SLIDERS)] = SLIDERS["alpha"].default,
    k_max: Annotated[int, _plan_number("k_max")] = int(PLAN_NUMBERS["k_max"].default),
    max_num_seqs: Annotated[int, _plan_number("max_num_seqs")] = int(
        PLAN_NUMBERS["max_num_seqs"].default),
    mix: Annotated[list[MixEntry] | None, Query(
        max_length=MIX_MAX_DOMAINS,
        description="a traffic mix instead of alpha, one NAME:WEIGHT:ALPHA per domain "
                    "(repeat the parameter): throughput is the weighted mean of the expected "
                    "tokens per cycle, not that of the mean alpha")] = None,
    bandwidth_tb_s: Annotated[Rate, Query(description="memory bandwidth, TB/s per GPU, "
                                          "instead of the preset's")] = None,
    tflops: Annotated[Rate, Query(description="peak dense TFLOP/s per GPU, for every dtype, "
                                  "instead of the preset's")] = None,
    target_params_b: Billions = None, target_layers: Count = None, target_heads: Count = None,
    target_kv_heads: Count = None, target_head_dim: Count = None,
    draft_params_b: Billions = None, draft_layers: Count = None, draft_heads: Count = None,
    draft_kv_heads: Count = None, draft_head_dim: Count = None,
) -> dict[str, Any]:
    """For every batch from 1 to `max_num_seqs`, the k in 0..`k_max` with the highest
    throughput speedup `S(B, k) = E_k / (k c(B) + v(B, k))` on the roofline model (k = 0 is
    speculation off), neighbours with the same k merged into vLLM's inclusive ranges
    (`num_speculative_tokens_per_batch_size`). Formulas: DESIGN.md, "Batched speculation and
    a batch-size schedule"."""
    hw = hardware_for(hardware.value, measurement_store(request.app).curves()[0])
    if bandwidth_tb_s is not None or tflops is not None:
        flops = {d: tflops * 1e12 for d in DTYPES} if tflops is not None else hw.flops
        hw = replace(hw, label=f"{hw.label} (edited)", flops=flops,
                     bandwidth=hw.bandwidth if bandwidth_tb_s is None else bandwidth_tb_s * 1e12)
    given = locals()
    target = _edited(PAIRS[pair.value].target, "target", given)
    draft = _edited(PAIRS[pair.value].draft, "draft", given)
    s = Setting(hw, target, draft, dtype.value, gpus, context)
    domains, notices = mix_domains(mix) if mix else (single(alpha), [])
    try:
        return report(domains, setting_costs(s), k_max, max_num_seqs, notices=notices)
    except PlanError as error:  # costs that are not finite: say so, never a 500
        return JSONResponse(status_code=422, content={
            "message": str(error), "detail": [{"loc": ["query"], "msg": str(error)}]})
