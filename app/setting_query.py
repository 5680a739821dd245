"""The query parameters that ``GET /api/roofline`` and ``GET /api/plan`` share, under the names
the page's link and ``specscope plan`` use (:mod:`engine.planner.inputs`), read once into
:class:`~engine.planner.inputs.PlanInputs` and the roofline's
:class:`~engine.analytic.passes.Setting` (FastAPI dependencies). The names these routes took
before (``pair``, ``usable_fraction``, ``link_latency_us``, ``bandwidth_fraction``,
``flops_fraction``, ``draft_on_one_gpu``) are still read, marked deprecated; where both are
given, the new name wins."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from fastapi import Depends, Query, Request

from app.measurements import measurement_store
from app.params import Slider
from app.roofline import CHOICES, NUMBERS, OVERHEAD_NUMBERS, hardware_for
from engine.analytic.passes import Setting
from engine.analytic.presets import DTYPES, HARDWARE, PAIRS
from engine.planner.costs import setting_of
from engine.planner.inputs import DRAFT_PLACES, EDITS, PlanInputs

HardwareName = Enum("HardwareName", {n: n for n in HARDWARE}, type=str)
PairName = Enum("PairName", {n: n for n in PAIRS}, type=str)
Dtype = Enum("Dtype", {n: n for n in DTYPES}, type=str)
KvDtype = Enum("KvDtype", {n: n for n in CHOICES["kv_dtype"][1]}, type=str)
Placement = Enum("Placement", {n.replace("-", "_"): n for n in DRAFT_PLACES}, type=str)
DEFAULT_HARDWARE = HardwareName(CHOICES["hardware"][0])
DEFAULT_PAIR = PairName(CHOICES["models"][0])
DEFAULT_DTYPE = Dtype(CHOICES["dtype"][0])
DEFAULT_KV_DTYPE = KvDtype(CHOICES["kv_dtype"][0])
EngineName = Enum("EngineName", {n.replace("-", "_"): n for n in CHOICES["engine"][1]}, type=str)
DEFAULT_ENGINE = EngineName(CHOICES["engine"][0])


def number_query(name: str, source: dict, deprecated: bool = False, alias: str | None = None,
                 ) -> Any:
    """A query parameter with the range and label of the page's control ``name``."""
    s = source[name]
    return Query(ge=s.minimum, le=s.maximum, description=f"{s.label}; {s.describe_range()}",
                 deprecated=deprecated or None, alias=alias)


def _old(name: str) -> Any:
    s = NUMBERS[name]
    return Query(ge=s.minimum, le=s.maximum, deprecated=True, description=f"the old name of {name}")


def _edit(name: str) -> Any:
    words, lo, hi, _ = EDITS[name]
    return Query(ge=lo, le=hi, description=words)


# Each query parameter named otherwise than the control it takes its range from, for the
# messages (app.errors): what a value must be.
QUERY_NUMBERS: dict[str, Slider] = {
    "usable_fraction": NUMBERS["usable"], "link_latency_us": NUMBERS["latency_us"],
    "bandwidth_fraction": NUMBERS["bw_share"], "flops_fraction": NUMBERS["flops_share"],
    **{name: Slider(name, words, lo, hi, lo, lo, integer=integer)
       for name, (words, lo, hi, integer) in EDITS.items()},
    **OVERHEAD_NUMBERS,
}


def _overhead(name: str) -> Any:
    s = OVERHEAD_NUMBERS[name]
    return Query(ge=s.minimum, le=s.maximum, description=(
        f"{s.label}, instead of the fitted default (the published fit for a GPU preset, "
        f"SPECSCOPE_MACHINE_COSTS for this machine); {s.describe_range()}"))


Rate = Annotated[float | None, _edit("link_gb_s")]


def _pick(new: Any, old: Any, default: Any) -> Any:
    """The value under the new name, else under the old one (the new name wins: both are
    valid queries)."""
    return new if new is not None else old if old is not None else default


def inputs_query(
    hardware: Annotated[HardwareName, Query(
        description="a hardware preset; bandwidth_tb_s and tflops replace its figures")
    ] = DEFAULT_HARDWARE,
    models: Annotated[PairName | None, Query(
        description="a model-pair preset; the target_* and draft_* parameters replace its "
                    "shapes")] = None,
    pair: Annotated[PairName | None, Query(deprecated=True,
                                           description="the old name of models")] = None,
    dtype: Annotated[Dtype, Query(
        description="the weights' bytes per parameter: bf16 2, fp8 1, int8 1 and int4 0.5 "
                    "(weight-only; int4 plus a bf16 scale and zero point a group of 128), "
                    "fp32 4")
    ] = DEFAULT_DTYPE,
    kv_dtype: Annotated[KvDtype, Query(
        description="the KV cache's dtype; auto: bf16 (fp32 beside fp32 weights), as int4 "
                    "and fp8 weights leave it")] = DEFAULT_KV_DTYPE,
    engine: Annotated[EngineName, Query(
        description="the engine that serves: its fitted overheads price the setting "
                    "(engine.analytic.engines says where each comes from)")] = DEFAULT_ENGINE,
    gpus: Annotated[int, number_query("gpus", NUMBERS)] = 1,
    context: Annotated[int, number_query("context", NUMBERS)] = int(NUMBERS["context"].default),
    usable: Annotated[float | None, number_query("usable", NUMBERS)] = None,
    usable_fraction: Annotated[float | None, _old("usable")] = None,
    latency_us: Annotated[float | None, number_query("latency_us", NUMBERS)] = None,
    link_latency_us: Annotated[float | None, _old("latency_us")] = None,
    bw_share: Annotated[float | None, number_query("bw_share", NUMBERS)] = None,
    bandwidth_fraction: Annotated[float | None, _old("bw_share")] = None,
    flops_share: Annotated[float | None, number_query("flops_share", NUMBERS)] = None,
    flops_fraction: Annotated[float | None, _old("flops_share")] = None,
    draft_placement: Annotated[Placement | None, Query(
        description="sharded: the draft at the target's tensor-parallel size (what vLLM "
                    "0.32 runs); one-gpu: whole on one GPU (a what-if vLLM refuses)")] = None,
    draft_on_one_gpu: Annotated[bool | None, Query(
        deprecated=True, description="the old form of draft_placement=one-gpu")] = None,
    link_gb_s: Rate = None,
    bandwidth_tb_s: Annotated[float | None, _edit("bandwidth_tb_s")] = None,
    tflops: Annotated[float | None, _edit("tflops")] = None,
    target_params_b: Annotated[float | None, _edit("target_params_b")] = None,
    target_layers: Annotated[int | None, _edit("target_layers")] = None,
    target_heads: Annotated[int | None, _edit("target_heads")] = None,
    target_kv_heads: Annotated[int | None, _edit("target_kv_heads")] = None,
    target_head_dim: Annotated[int | None, _edit("target_head_dim")] = None,
    draft_params_b: Annotated[float | None, _edit("draft_params_b")] = None,
    draft_layers: Annotated[int | None, _edit("draft_layers")] = None,
    draft_heads: Annotated[int | None, _edit("draft_heads")] = None,
    draft_kv_heads: Annotated[int | None, _edit("draft_kv_heads")] = None,
    draft_head_dim: Annotated[int | None, _edit("draft_head_dim")] = None,
    launch_us_per_layer: Annotated[float | None, _overhead("launch_us_per_layer")] = None,
    allreduce_us_per_log2: Annotated[float | None, _overhead("allreduce_us_per_log2")] = None,
    sample_row_overhead_us: Annotated[float | None, _overhead("sample_row_overhead_us")] = None,
    step_overhead_us: Annotated[float | None, _overhead("step_overhead_us")] = None,
    draft_overhead_us: Annotated[float | None, _overhead("draft_overhead_us")] = None,
    spec_overhead_ms: Annotated[float | None, _overhead("spec_overhead_ms")] = None,
    spec_row_overhead_us: Annotated[float | None, _overhead("spec_row_overhead_us")] = None,
) -> PlanInputs:
    """The hardware and model inputs the query gives (the plan's own are the routes')."""
    old_placement = None if draft_on_one_gpu is None else (
        "one-gpu" if draft_on_one_gpu else "sharded")
    placement = _pick(draft_placement.value if draft_placement else None,
                      old_placement, "sharded")
    return PlanInputs(
        hardware.value, _pick(models and models.value, pair and pair.value,
                              DEFAULT_PAIR.value),
        dtype.value, gpus, context,
        _pick(usable, usable_fraction, NUMBERS["usable"].default),
        _pick(latency_us, link_latency_us, NUMBERS["latency_us"].default),
        _pick(bw_share, bandwidth_fraction, NUMBERS["bw_share"].default),
        _pick(flops_share, flops_fraction, NUMBERS["flops_share"].default),
        placement, link_gb_s, bandwidth_tb_s, tflops, target_params_b, target_layers,
        target_heads, target_kv_heads, target_head_dim, draft_params_b, draft_layers,
        draft_heads, draft_kv_heads, draft_head_dim, launch_us_per_layer, allreduce_us_per_log2,
        sample_row_overhead_us, step_overhead_us, draft_overhead_us,
        spec_overhead_ms, spec_row_overhead_us, kv_dtype=kv_dtype.value, engine=engine.value)


InputsQuery = Annotated[PlanInputs, Depends(inputs_query)]


def setting_query(request: Request, inputs: InputsQuery) -> Setting:
    """The setting the query describes; alpha and k are the defaults (the routes set them).
    "This machine" takes a loaded measurement's fit and the costs file's overheads, as the
    page does."""
    hw = hardware_for(inputs.hardware, measurement_store(request.app).curves()[0])
    return setting_of(inputs, hw, request.app.state.settings.machine_costs)


SettingQuery = Annotated[Setting, Depends(setting_query)]
