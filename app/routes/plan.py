"""``GET /api/plan``: the draft length to speculate at each batch size, and vLLM's config.

The same hardware, model and alpha inputs as ``GET /api/roofline`` and the page, plus the
plan's own (``k_max``, ``max_num_seqs``, ``data_parallel``, ``draft_sample``, ``k0_overhead``,
``batch_mix``, ``mix``), under the names ``specscope plan`` takes; the answer is the JSON of
``specscope plan --json``."""

from __future__ import annotations

from dataclasses import replace
from enum import Enum
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, StringConstraints

from app.errors import error_responses
from app.params import SLIDERS
from app.plan import PLAN_NUMBERS, TEXT_MAX, mix_domains
from app.setting_query import InputsQuery, SettingQuery, number_query
from engine.analytic.drafters import EAGLE_HEADS, STREAMING_BUDGET
from engine.analytic.positions import POSITIONS_PATTERN
from engine.analytic.timed_costs import PlanError
from engine.analytic.trees import TREE_PATTERN
from engine.planner.drafters import KV_BUDGET_MAX, drafter_costs
from engine.planner.inputs import (
    BATCH_MIX_HELP,
    BATCH_MIX_K_HELP,
    BATCH_MIX_PATTERN,
    CHOICES,
    K0_HELP,
    K0_PATTERN,
    OUTPUT_TOKENS,
    REQUEST_RATE_HELP,
    REQUEST_RATE_MAX,
)
from engine.planner.provenance import by_hand
from engine.planner.report import report
from engine.planner.schedule import MIX_MAX_DOMAINS, MIX_PATTERN, by_position, single

DraftSample = Enum("DraftSample", {n: n for n in CHOICES["draft_sample"][1]}, type=str)
DEFAULT_SAMPLE = DraftSample(CHOICES["draft_sample"][0])
Drafter = Enum("Drafter", {n.replace("-", "_"): n for n in CHOICES["drafter"][1]}, type=str)
EagleHeadName = Enum("EagleHeadName", {n.replace("-", "_").replace(".", "_"): n
                                       for n in EAGLE_HEADS}, type=str)
DEFAULT_DRAFTER = Drafter(CHOICES["drafter"][0])
TARGET_EDITS = ("target_params_b", "target_layers", "target_heads", "target_kv_heads",
                "target_head_dim")

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
    gain_over_off: float = Field(description="the plan over no speculative config (its k = 0 "
                                             "ranges at their cost), likewise")
    fixed_over_off: float = Field(description="the best fixed k over no speculative config")
    weighted: bool = Field(description="the means are weighted by batch_mix")
    configure: bool = Field(description="whether to configure speculation at all")
    domains: list[PlanDomain]
    limiting: str | None
    speculates: bool
    notices: list[str]


class K0Out(BaseModel):
    source: str = Field(description="where the price of a k = 0 range comes from")
    points: list[list[float]] = Field(description="[batch, overhead] pairs: a k = 0 range's "
                                                  "step over a plain one, minus 1")


class AlphaSourceOut(BaseModel):
    origin: str = Field(description='"hand" here (the query gives alpha); "probe" or '
                                    '"metrics" from specscope plan')
    where: str = Field(description="the parameter or file alpha came from")
    target: str | None = Field(description="the target alpha was measured on, if known")
    draft: str | None = Field(description="the draft alpha was measured with, if known")
    drafter: str | None
    domains: list[str]
    temperature: float | None
    draft_sample: str | None
    text: str = Field(description="the source in one sentence")
    warning: str | None = Field(description="set when alpha was measured on another pair "
                                            "than the one planned")


class LatencyRow(BaseModel):
    batch: int
    k: int
    off_ms: float = Field(description="time per output token of one sequence, no "
                                      "speculative config (ms)")
    plan_ms: float = Field(description="the same as planned: the cycle's time over the "
                                       "tokens a row gains a cycle (ms)")


class BandOut(BaseModel):
    """Where speculation pays when no traffic is given: batches `lo`..`hi`."""

    lo: int
    hi: int
    best: float = Field(description="the highest speedup in the band, over no config")
    best_batch: int
    best_k: int
    sure_lo: int | None = Field(None, description="the interval's lower end clears 1x at "
                                                  "batches sure_lo..sure_hi, its first run "
                                                  "(null: nowhere)")
    sure_hi: int | None = Field(description="the end of that run")


class IntervalOut(BaseModel):
    """How far to trust the plan's speedups: factors on them from held-out errors."""

    level: float
    low: float
    high: float
    n: int = Field(description="held-out speedup points the interval rests on")
    inside: int = Field(description="left out in turn, the points inside their own interval")
    coverage: list[float] = Field(description="Wilson 95% interval of the coverage")
    source: str


class PlanOut(BaseModel):
    """The verdict, the schedule, vLLM's engine arguments (`engine_args`, its
    `speculative_config` among them; null when speculation is not to be configured: then
    `advice` says why), a Python snippet and a `vllm serve` line that deploy it."""

    verdict: str = Field(description="what to deploy, first: the band where speculation pays "
                                     "(no traffic given), or one answer for the batch mix")
    decision: str = Field(description="configure, measure first or do not configure")
    band: BandOut | None = Field(description="where speculation pays (null with a batch mix)")
    interval: IntervalOut
    configure: bool
    costs: str
    target: str
    draft: str
    draft_sample: str = Field(description="vLLM's draft_sample_method the alpha is for")
    alpha_note: str
    alpha_source: AlphaSourceOut | None = None
    method: str = Field("draft_model", description="the drafter as vLLM's speculative "
                                                   "method")
    k0: K0Out
    plan: PlanBody
    speculative_config: dict[str, Any] | None
    engine_args: dict[str, Any] | None
    python: str | None
    serve: str | None
    refused: str | None = Field(description="why vLLM would refuse this deployment, if it "
                                            "would")
    advice: str | None
    notices: list[str]
    latency: list[LatencyRow] | None = Field(None, description="TPOT at every planned batch")
    traffic: dict[str, Any] | None = Field(None, description=(
        "with request_rate: each side (off, plan) at its own batch: mean_batch, tpot_ms and "
        "the batch mix, or overloaded; gain = off / plan; the queueing assumption"))
    engine: str = Field("vllm", description="the engine that serves (its terms price it)")


@router.get("/plan", response_model=PlanOut, responses=error_responses(400, 422),
            summary="The k to speculate at each batch size, and vLLM's config for it")
def plan_api(
    setting: SettingQuery,
    inputs: InputsQuery,
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
    data_parallel: Annotated[int, number_query("data_parallel", PLAN_NUMBERS)] = 1,
    draft_sample: Annotated[DraftSample, Query(
        description="vLLM's draft_sample_method the alpha is for")] = DEFAULT_SAMPLE,
    k0_overhead: Annotated[str, Query(max_length=TEXT_MAX, pattern=K0_PATTERN,
                                      description=K0_HELP)] = "cited",
    batch_mix: Annotated[str, Query(max_length=TEXT_MAX, pattern=BATCH_MIX_PATTERN,
                                    description=BATCH_MIX_HELP)] = "",
    batch_mix_k: Annotated[int, Query(ge=0, le=16, description=BATCH_MIX_K_HELP)] = 0,
    request_rate: Annotated[float | None, Query(
        gt=0, le=REQUEST_RATE_MAX, description=REQUEST_RATE_HELP)] = None,
    output_tokens: Annotated[int, Query(
        ge=1, le=1_000_000, description="with request_rate: tokens each request decodes")
    ] = OUTPUT_TOKENS,
    drafter: Annotated[Drafter, Query(
        description="model: the pair's draft model; eagle: an EAGLE-style head of the "
                    "target; medusa: Medusa heads of the target (one pass drafts k, a fixed k "
                    "within the heads); mtp: the target's own multi-token-prediction layers; "
                    "self-spec: the target drafting over a bounded KV cache (vLLM 0.32 does "
                    "not serve it: no config). eagle and mtp draft with a preset trained for "
                    "the target as shipped: with any target_* edit the target is another "
                    "model, which no head drafts for, and the plan is 422")] = DEFAULT_DRAFTER,
    eagle_head: Annotated[EagleHeadName | None, Query(
        description="with drafter=eagle: the head preset (default: the target's)")] = None,
    draft_kv_budget: Annotated[int, Query(
        ge=1, le=KV_BUDGET_MAX, description="with drafter=self-spec: the draft's KV cache, "
                                            "tokens")] = STREAMING_BUDGET,
    tree: Annotated[str, Query(
        max_length=20, pattern=TREE_PATTERN,
        description="STEPS,TOPK,DRAFT_TOKENS: price a token tree for SGLang's EAGLE "
                    "(engine=sglang, drafter=eagle) and give its launch line")] = "",
    positions: Annotated[str | None, Query(
        max_length=200, pattern=POSITIONS_PATTERN,
        description="acceptance by position instead of alpha: survival rates (the share of "
                    "drafts whose first i tokens were accepted), comma-separated, e.g. "
                    "0.84,0.6,0.39; each k is priced from them")] = None,
) -> dict[str, Any]:
    """For every batch from 1 to `max_num_seqs`, the k in 0..`k_max` with the highest
    throughput speedup `S(B, k) = E_k / (k c(B) + v(B, k))` on the roofline model (k = 0 is
    speculation off), neighbours with the same k merged into vLLM's inclusive ranges
    (`num_speculative_tokens_per_batch_size`). Formulas: docs/design.md, "The batch-size
    schedule"."""
    if mix:
        domains, notices = mix_domains(mix)
    elif positions:
        try:
            domains, notices = by_position(positions), []
        except PlanError as error:  # rates that rise: said, and one alpha used instead
            domains, notices = single(alpha), [f"{error}; planned with alpha {alpha:g}."]
            positions = None
    else:
        domains, notices = single(alpha), []
    inputs = replace(inputs, alpha=None if mix else alpha, mix=tuple(domains) if mix else (),
                     positions="" if mix or not positions else positions,
                     k_max=k_max, max_num_seqs=max_num_seqs, data_parallel=data_parallel,
                     draft_sample=draft_sample.value, k0_overhead=k0_overhead,
                     batch_mix=batch_mix, batch_mix_k=batch_mix_k, request_rate=request_rate,
                     output_tokens=output_tokens, drafter=drafter.value,
                     eagle_head=eagle_head.value if eagle_head else None,
                     draft_kv_budget=draft_kv_budget, tree=tree)
    try:
        costs = drafter_costs(setting, inputs.drafter, inputs.eagle_head,
                              inputs.draft_kv_budget)
        return report(domains, costs, inputs, notices=notices,
                      source=by_hand("mix" if mix else "alpha", [d.name for d in domains]))
    except PlanError as error:  # no head for the target, costs not finite: say so, never 500
        message = str(error)
        edits = [name for name in TARGET_EDITS if getattr(inputs, name) is not None]
        if inputs.drafter in ("eagle", "mtp") and edits:
            # A head is trained on one checkpoint's features: say which edits left it behind.
            message += (f" ({', '.join(edits)} made the target another model; leave them "
                        "out, or plan with drafter=model)")
        return JSONResponse(status_code=422, content={
            "message": message, "detail": [{"loc": ["query"], "msg": message}]})
