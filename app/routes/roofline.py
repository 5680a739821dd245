"""``GET /api/roofline``: the roofline model of speculation at batch B, as JSON."""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Annotated, Any

from fastapi import APIRouter

from app.errors import error_responses
from app.params import SLIDERS
from app.roofline import NUMBERS
from app.setting_query import SettingQuery, number_query
from engine.analytic.intervals import LEVEL
from engine.analytic.roofline import roofline
from engine.analytic.validate import default_intervals
from engine.planner.inputs import overhead_inputs

router = APIRouter(prefix="/api", tags=["roofline"])


@router.get("/roofline", summary="Speculation at batch B on given hardware (roofline model)",
            responses=error_responses(400, 422))
def roofline_api(
    setting: SettingQuery,
    batch: Annotated[int, number_query("batch", NUMBERS)] = int(NUMBERS["batch"].default),
    alpha: Annotated[float, number_query("alpha", SLIDERS)] = SLIDERS["alpha"].default,
    k: Annotated[int, number_query("k", SLIDERS)] = int(SLIDERS["k"].default),
) -> dict[str, Any]:
    """Step times, c(B), v(B), the throughput speedup S(B), tokens/s, the break-even batch
    (null when speculation pays at every batch up to 1024), the ridge point, whether the
    verification pass is memory- or compute-bound, the best k at this batch, and the curve
    over batch 1, 2, 4, ..., 1024 (each point says whether it fits in memory). Memory per GPU:
    ``fits``, ``memory_gb_per_gpu`` (weights + KV cache of both models), ``memory_gb_available``
    (device memory x ``usable``), ``max_batch_that_fits`` (searched up to 65,536; null
    when batch 1 does not fit) and ``max_batch_without_draft``. Tensor parallelism:
    ``target_pass``, ``verify_pass`` and ``draft_pass`` give each pass's memory, compute and
    communication times on one GPU (two ring all-reduces a layer when ``gpus`` > 1), its total
    ``max(memory, compute) + communication`` and its bound. Overheads: ``overheads`` gives the
    five terms in use (the fitted defaults unless the query gives them) and where they come
    from; ``t_step_ms`` is a plain step with its launch and the sampler, each pass's
    ``overhead_ms`` what it pays beyond bytes and FLOPs, and c(B), v(B) and S(B) count them (a
    plain step ``t_p(B,1) + l(p) + s B``, a cycle ``k (t_q + l(q)) + t_p(B,k+1) + l(p) + s B +
    o_spec``, each pass launching its own model's layers).
    Formulas: docs/design.md,
    "Batch size and hardware" and "Memory capacity and tensor parallelism"."""
    s = replace(setting, alpha=alpha, k=k)
    hw, target, draft = s.hardware, s.target, s.draft
    result = asdict(roofline(s, batch))
    # bandwidth and FLOP/s as used: one GPU's datasheet figure times the achieved fraction
    result["hardware"] = {"label": hw.label, "bandwidth_tb_s": s.gpu_bandwidth / 1e12,
                          "tflops": s.gpu_flops / 1e12, "peak_bandwidth_tb_s": hw.bandwidth / 1e12,
                          "peak_tflops": hw.peak_flops(s.dtype) / 1e12,
                          "achieved": {"bandwidth": s.bw_share if not hw.achieved
                                       else 1.0,
                                       "flops": s.flops_share if not hw.achieved else 1.0},
                          "memory_gb": hw.memory / 1e9,
                          "link_gb_s": hw.link_bandwidth / 1e9, "source": hw.source}
    if math.isinf(result["memory_gb_available"]):  # a machine whose memory the model does not know
        result["memory_gb_available"] = result["hardware"]["memory_gb"] = None
    o = s.overheads
    result["overheads"] = overhead_inputs(o) | {
        "schedule_overhead_ms": o.schedule_fixed_s * 1e3,
        "schedule_row_overhead_us": o.schedule_per_row_s * 1e6, "source": o.source}
    band = default_intervals()["speedup"]
    result["speedup_interval"] = {"level": LEVEL, "low": result["speedup"] * band.low,
                                  "high": result["speedup"] * band.high, "n": band.n,
                                  "inside": band.inside, "coverage": list(band.coverage),
                                  "source": band.describe()}
    result["target"] = {"label": target.label, "params": target.params}
    result["draft"] = {"label": draft.label, "params": draft.params}
    return result
