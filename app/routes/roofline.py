"""``GET /api/roofline``: the roofline model of speculation at batch B, as JSON."""

from __future__ import annotations

from dataclasses import asdict
from enum import Enum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.exceptions import RequestValidationError

from app.measurements import measurement_store
from app.params import SLIDERS
from app.roofline import CHOICES, NUMBERS, hardware_for
from engine.analytic.roofline import (
    DTYPES,
    HARDWARE,
    PAIRS,
    Hardware,
    ModelShape,
    Setting,
    roofline,
)

router = APIRouter(prefix="/api", tags=["roofline"])

CUSTOM = "custom"
HardwareName = Enum("HardwareName", {n: n for n in [*HARDWARE, CUSTOM]}, type=str)
PairName = Enum("PairName", {n: n for n in [*PAIRS, CUSTOM]}, type=str)
Dtype = Enum("Dtype", {n: n for n in DTYPES}, type=str)
SHAPE_FIELDS = ("params_b", "layers", "heads", "kv_heads", "head_dim")
DEFAULT_HARDWARE = HardwareName(CHOICES["hardware"][0])
DEFAULT_PAIR = PairName(CHOICES["models"][0])
DEFAULT_DTYPE = Dtype(CHOICES["dtype"][0])
HARDWARE_HELP = "a hardware preset, or custom with bandwidth_tb_s and tflops"
PAIR_HELP = "a model-pair preset, or custom with the target_* and draft_* shapes"
DTYPE_HELP = "bytes per parameter: bf16 2, fp8 1, int4 0.5, fp32 4"


def _number(name: str, source: dict) -> Any:
    s = source[name]
    return Query(ge=s.minimum, le=s.maximum, description=f"{s.label}; {s.describe_range()}")


def _missing(names: list[str], why: str) -> RequestValidationError:
    return RequestValidationError([
        {"loc": ("query", name), "msg": f"is required {why}", "input": None} for name in names
    ])


def _custom_shape(which: str, given: dict[str, float | None]) -> ModelShape:
    missing = [f"{which}_{f}" for f in SHAPE_FIELDS if given[f] is None]
    if missing:
        raise _missing(missing, "when pair=custom")
    return ModelShape(f"custom {which}", round(given["params_b"] * 1e9), int(given["layers"]),
                      int(given["heads"]), int(given["kv_heads"]), int(given["head_dim"]))


Positive = Annotated[float | None, Query(gt=0)]
Count = Annotated[int | None, Query(ge=1, le=100_000)]


@router.get("/roofline", summary="Speculation at batch B on given hardware (roofline model)")
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
    bandwidth_tb_s: Annotated[Positive, Query(gt=0, description="custom memory bandwidth, "
                                              "TB/s per GPU")] = None,
    tflops: Annotated[Positive, Query(gt=0, description="custom peak dense TFLOP/s per GPU")
                      ] = None,
    target_params_b: Positive = None, target_layers: Count = None, target_heads: Count = None,
    target_kv_heads: Count = None, target_head_dim: Count = None,
    draft_params_b: Positive = None, draft_layers: Count = None, draft_heads: Count = None,
    draft_kv_heads: Count = None, draft_head_dim: Count = None,
) -> dict[str, Any]:
    """Step times, c(B), v(B), the throughput speedup S(B), tokens/s, the break-even batch
    (null when speculation pays at every batch up to 1024), the ridge point, whether the
    verification pass is memory- or compute-bound, the best k at this batch, and the curve
    over batch 1, 2, 4, ..., 1024. Formulas: DESIGN.md, "the roofline model"."""
    if hardware.value == CUSTOM:
        if bandwidth_tb_s is None or tflops is None:
            raise _missing([n for n, v in (("bandwidth_tb_s", bandwidth_tb_s),
                                           ("tflops", tflops)) if v is None],
                           "when hardware=custom")
        hw = Hardware("custom", bandwidth_tb_s * 1e12, {"bf16": tflops * 1e12})
    else:
        hw = hardware_for(hardware.value, measurement_store(request.app).curves()[0])
    if pair.value == CUSTOM:
        given = locals()
        target = _custom_shape("target", {f: given[f"target_{f}"] for f in SHAPE_FIELDS})
        draft = _custom_shape("draft", {f: given[f"draft_{f}"] for f in SHAPE_FIELDS})
    else:
        target, draft = PAIRS[pair.value].target, PAIRS[pair.value].draft
    s = Setting(hw, target, draft, dtype.value, gpus, context, alpha, k)
    result = asdict(roofline(s, batch))
    result["hardware"] = {"label": hw.label, "bandwidth_tb_s": s.bandwidth / 1e12,
                          "tflops": s.flops / 1e12, "source": hw.source}
    result["target"] = {"label": target.label, "params": target.params}
    result["draft"] = {"label": draft.label, "params": draft.params}
    return result
