"""The hardware and model query parameters that ``GET /api/roofline`` and ``GET /api/plan``
share, read once into an :class:`engine.analytic.roofline.Setting` (a FastAPI dependency)."""

from __future__ import annotations

from dataclasses import replace
from enum import Enum
from typing import Annotated, Any

from fastapi import Depends, Query, Request

from app.measurements import measurement_store
from app.params import Slider
from app.roofline import CHOICES, NUMBERS, hardware_for
from engine.analytic.roofline import DTYPES, HARDWARE, PAIRS, ModelShape, Setting

HardwareName = Enum("HardwareName", {n: n for n in HARDWARE}, type=str)
PairName = Enum("PairName", {n: n for n in PAIRS}, type=str)
Dtype = Enum("Dtype", {n: n for n in DTYPES}, type=str)
SHAPE_FIELDS = ("params_b", "layers", "heads", "kv_heads", "head_dim")
DEFAULT_HARDWARE = HardwareName(CHOICES["hardware"][0])
DEFAULT_PAIR = PairName(CHOICES["models"][0])
DEFAULT_DTYPE = Dtype(CHOICES["dtype"][0])


def number_query(name: str, source: dict) -> Any:
    """A query parameter with the range and label of the page's control ``name``."""
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


# Bounds wide enough for any real model or device, narrow enough that every figure is finite
# (at least 1 MB/s and 1 MFLOP/s).
BILLIONS = Slider("billions", "parameters, billions", 1e-6, 100_000, 1e-6, 1)
COUNT = Slider("count", "count", 1, 100_000, 1, 1, integer=True)
RATE = Slider("rate", "rate", 1e-6, 1_000_000, 1e-6, 1)
Billions = Annotated[float | None, Query(ge=BILLIONS.minimum, le=BILLIONS.maximum,
                                         description="parameters, billions")]
Count = Annotated[int | None, Query(ge=COUNT.minimum, le=COUNT.maximum)]
Rate = Annotated[float | None, Query(ge=RATE.minimum, le=RATE.maximum)]
# Each query parameter named otherwise than the control it takes its range from, for the
# messages (app.errors): what a value must be.
QUERY_NUMBERS: dict[str, Slider] = {
    "usable_fraction": NUMBERS["usable"], "link_latency_us": NUMBERS["latency_us"],
    "bandwidth_fraction": NUMBERS["bw_share"], "flops_fraction": NUMBERS["flops_share"],
    "link_gb_s": RATE, "bandwidth_tb_s": RATE, "tflops": RATE,
    **{f"{which}_params_b": BILLIONS for which in ("target", "draft")},
    **{f"{which}_{f}": COUNT for which in ("target", "draft") for f in SHAPE_FIELDS[1:]},
}


def setting_query(
    request: Request,
    hardware: Annotated[HardwareName, Query(
        description="a hardware preset; bandwidth_tb_s and tflops replace its figures")
    ] = DEFAULT_HARDWARE,
    pair: Annotated[PairName, Query(
        description="a model-pair preset; the target_* and draft_* parameters replace its "
                    "shapes")] = DEFAULT_PAIR,
    dtype: Annotated[Dtype, Query(
        description="bytes per parameter: bf16 2, fp8 1, int4 0.5, fp32 4")] = DEFAULT_DTYPE,
    gpus: Annotated[int, number_query("gpus", NUMBERS)] = 1,
    context: Annotated[int, number_query("context", NUMBERS)] = int(NUMBERS["context"].default),
    usable_fraction: Annotated[float, number_query("usable", NUMBERS)] = NUMBERS[
        "usable"].default,
    link_latency_us: Annotated[float, number_query("latency_us", NUMBERS)] = NUMBERS[
        "latency_us"].default,
    link_gb_s: Annotated[Rate, Query(description="GPU-to-GPU link bandwidth, GB/s each way, "
                                     "instead of the preset's")] = None,
    bandwidth_fraction: Annotated[float, number_query("bw_share", NUMBERS)] = NUMBERS[
        "bw_share"].default,
    flops_fraction: Annotated[float, number_query("flops_share", NUMBERS)] = NUMBERS[
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
) -> Setting:
    """The setting the query describes; alpha and k are the defaults (the routes set them)."""
    hw = hardware_for(hardware.value, measurement_store(request.app).curves()[0])
    if bandwidth_tb_s is not None or tflops is not None or link_gb_s is not None:
        flops = {d: tflops * 1e12 for d in DTYPES} if tflops is not None else hw.flops
        hw = replace(hw, label=f"{hw.label} (edited)", flops=flops,
                     bandwidth=hw.bandwidth if bandwidth_tb_s is None else bandwidth_tb_s * 1e12,
                     link_bandwidth=hw.link_bandwidth if link_gb_s is None else link_gb_s * 1e9)
    given = locals()
    return Setting(hw, _edited(PAIRS[pair.value].target, "target", given),
                   _edited(PAIRS[pair.value].draft, "draft", given), dtype.value, gpus, context,
                   usable_fraction=usable_fraction, link_latency_s=link_latency_us / 1e6,
                   draft_sharded=not draft_on_one_gpu, bandwidth_fraction=bandwidth_fraction,
                   flops_fraction=flops_fraction)


SettingQuery = Annotated[Setting, Depends(setting_query)]
