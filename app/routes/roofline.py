"""``GET /api/roofline``: the roofline model of speculation at batch B, as JSON."""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from enum import Enum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from app.errors import error_responses
from app.measurements import measurement_store
from app.params import SLIDERS
from app.roofline import CHOICES, NUMBERS, hardware_for
from engine.analytic.roofline import (
    DTYPES,
    HARDWARE,
    PAIRS,
    ModelShape,
    Setting,
    roofline,
)

router = APIRouter(prefix="/api", tags=["roofline"])

HardwareName = Enum("HardwareName", {n: n for n in HARDWARE}, type=str)
PairName = Enum("PairName", {n: n for n in PAIRS}, type=str)
Dtype = Enum("Dtype", {n: n for n in DTYPES}, type=str)
SHAPE_FIELDS = ("params_b", "layers", "heads", "kv_heads", "head_dim")
DEFAULT_HARDWARE = HardwareName(CHOICES["hardware"][0])
DEFAULT_PAIR = PairName(CHOICES["models"][0])
DEFAULT_DTYPE = Dtype(CHOICES["dtype"][0])
HARDWARE_HELP = "a hardware preset; bandwidth_tb_s and tflops replace its figures"
PAIR_HELP = "a model-pair preset; the target_* and draft_* parameters replace its shapes"
DTYPE_HELP = "bytes per parameter: bf16 2, fp8 1, int4 0.5, fp32 4"


def _number(name: str, source: dict) -> Any:
    s = source[name]
    return Query(ge=s.minimum, le=s.maximum, description=f"{s.label}; {s.describe_range()}")


def _edited(shape: ModelShape, which: str, given: dict[str, float | None]) -> ModelShape:
    """The preset's shape with the fields the request gives replaced."""
    changes = {f: given[f"{which}_{f}"] for f in SHAPE_FIELDS if given[f"{which}_{f}"] is not None}
    if not changes:
        return shape
    if "params_b" in changes:
        changes["params"] = round(changes.pop("params_b") * 1e9)
    return replace(shape, label=f"{shape.label} (edited)", **changes)


# Bounds wide enough for any real model or device, narrow enough that every figure is finite.
Billions = Annotated[float | None, Query(ge=1e-6, le=100_000, description="parameters, billions")]
Count = Annotated[int | None, Query(ge=1, le=100_000)]
Rate = Annotated[float | None, Query(gt=0, le=1_000_000)]


@router.get("/roofline", summary="Speculation at batch B on given hardware (roofline model)",
            responses=error_responses(400, 422))
def roofline_api(
    request: Request,
    hardware: Annotated[HardwareName, Query(description=HARDWARE_HELP)] = DEFAULT_HARDWARE,
    pair: Annotated[PairName, Query(description=PAIR_HELP)] = DEFAULT_PAIR,
    dtype: Annotated[Dtype, Query(description=DTYPE_HELP)] = DEFAULT_DTYPE,
    gpus: Annotated[int, _number("gpus", NUMBERS)] = 1,
    context: Annotated[int, _number("context", NUMBERS)] = int(NUMBERS["context"].default),
    batch: Annotated[int, _number("batch", NUMBERS)] = int(NUMBERS["batch"].default),
    alpha: Annotated[float, _number("alpha", SLIDERS)] = SLIDERS["alpha"].default,
    k: Annotated[int, _number("k", SLIDERS)] = int(SLIDERS["k"].default),
    usable_fraction: Annotated[float, _number("usable", NUMBERS)] = NUMBERS["usable"].default,
    link_latency_us: Annotated[float, _number("latency_us", NUMBERS)] = NUMBERS[
        "latency_us"].default,
    link_gb_s: Annotated[Rate, Query(description="GPU-to-GPU link bandwidth, GB/s each way, "
                                     "instead of the preset's")] = None,
    bandwidth_fraction: Annotated[float, _number("bw_share", NUMBERS)] = NUMBERS[
        "bw_share"].default,
    flops_fraction: Annotated[float, _number("flops_share", NUMBERS)] = NUMBERS[
        "flops_share"].default,
    draft_on_one_gpu: Annotated[bool, Query(description="put the draft whole on one GPU; "
                                            "vLLM 0.32 shards it like the target")] = False,
    bandwidth_tb_s: Annotated[Rate, Query(description="memory bandwidth, TB/s per GPU, "
                                          "instead of the preset's")] = None,
    tflops: Annotated[Rate, Query(description="peak dense TFLOP/s per GPU, for every dtype, "
                                  "instead of the preset's")] = None,
    target_params_b: Billions = None, target_layers: Count = None, target_heads: Count = None,
    target_kv_heads: Count = None, target_head_dim: Count = None,
    draft_params_b: Billions = None, draft_layers: Count = None, draft_heads: Count = None,
    draft_kv_heads: Count = None, draft_head_dim: Count = None,
) -> dict[str, Any]:
    """Step times, c(B), v(B), the throughput speedup S(B), tokens/s, the break-even batch
    (null when speculation pays at every batch up to 1024), the ridge point, whether the
    verification pass is memory- or compute-bound, the best k at this batch, and the curve
    over batch 1, 2, 4, ..., 1024 (each point says whether it fits in memory). Memory per GPU:
    ``fits``, ``memory_gb_per_gpu`` (weights + KV cache of both models), ``memory_gb_available``
    (device memory x ``usable_fraction``), ``max_batch_that_fits`` (searched up to 65,536; null
    when batch 1 does not fit) and ``max_batch_without_draft``. Tensor parallelism:
    ``target_pass``, ``verify_pass`` and ``draft_pass`` give each pass's memory, compute and
    communication times on one GPU (two ring all-reduces a layer when ``gpus`` > 1), its total
    ``max(memory, compute) + communication`` and its bound. Formulas: docs/design.md,
    "Batch size and hardware" and "Memory capacity and tensor parallelism"."""
    hw = hardware_for(hardware.value, measurement_store(request.app).curves()[0])
    if bandwidth_tb_s is not None or tflops is not None or link_gb_s is not None:
        flops = {d: tflops * 1e12 for d in DTYPES} if tflops is not None else hw.flops
        hw = replace(hw, label=f"{hw.label} (edited)", flops=flops,
                     bandwidth=hw.bandwidth if bandwidth_tb_s is None else bandwidth_tb_s * 1e12,
                     link_bandwidth=hw.link_bandwidth if link_gb_s is None else link_gb_s * 1e9)
    given = locals()
    target = _edited(PAIRS[pair.value].target, "target", given)
    draft = _edited(PAIRS[pair.value].draft, "draft", given)
    s = Setting(hw, target, draft, dtype.value, gpus, context, alpha, k, usable_fraction,
                link_latency_us / 1e6, not draft_on_one_gpu, bandwidth_fraction, flops_fraction)
    result = asdict(roofline(s, batch))
    # bandwidth and FLOP/s as used: one GPU's datasheet figure times the achieved fraction
    result["hardware"] = {"label": hw.label, "bandwidth_tb_s": s.gpu_bandwidth / 1e12,
                          "tflops": s.gpu_flops / 1e12, "peak_bandwidth_tb_s": hw.bandwidth / 1e12,
                          "peak_tflops": hw.peak_flops(dtype.value) / 1e12,
                          "achieved": {"bandwidth": s.bandwidth_fraction if not hw.achieved
                                       else 1.0,
                                       "flops": s.flops_fraction if not hw.achieved else 1.0},
                          "memory_gb": hw.memory / 1e9,
                          "link_gb_s": hw.link_bandwidth / 1e9, "source": hw.source}
    if math.isinf(result["memory_gb_available"]):  # a machine whose memory the model does not know
        result["memory_gb_available"] = result["hardware"]["memory_gb"] = None
    result["target"] = {"label": target.label, "params": target.params}
    result["draft"] = {"label": draft.label, "params": draft.params}
    return result
