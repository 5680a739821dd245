"""The plan's inputs under one set of names: the page's link, ``GET /api/roofline``, ``GET
/api/plan`` and ``specscope plan`` all read these (the command line as ``--bw-share`` for
``bw_share``), with the same bounds and defaults.

:class:`PlanInputs` holds them; :meth:`PlanInputs.setting` turns the hardware and model ones
into the roofline's :class:`~engine.analytic.passes.Setting`, and :meth:`PlanInputs.command`
writes the ``specscope plan`` line that reproduces a plan made from them.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, fields, replace

from engine.analytic import engines
from engine.analytic.acceptance import DRAFT_SAMPLES
from engine.analytic.break_even import BATCH_MAX
from engine.analytic.default_overheads import preset_overheads
from engine.analytic.drafters import STREAMING_BUDGET
from engine.analytic.overheads import Overheads
from engine.analytic.passes import LINK_LATENCY_S, USABLE_FRACTION, Setting
from engine.analytic.presets import (
    ACHIEVED_BANDWIDTH,
    ACHIEVED_FLOPS,
    DTYPES,
    HARDWARE,
    PAIRS,
    Hardware,
    ModelShape,
)
from engine.analytic.theory import CURVE_MAX_K
from engine.planner.drafters import DRAFTERS
from engine.planner.schedule import K_MAX, MAX_NUM_SEQS, Domain, mix_entry
from engine.planner.vllm_config import DEFAULT_DRAFT_SAMPLE


@dataclass(frozen=True)
class Bound:
    """A numeric input: its label, range, step and default, defined once."""

    name: str
    label: str
    minimum: float
    maximum: float
    step: float
    default: float
    integer: bool = False

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


NUMBERS: dict[str, Bound] = {b.name: b for b in (
    Bound("gpus", "GPUs (tensor parallel)", 1, 8, 1, 1, integer=True),
    Bound("context", "context length L (tokens)", 0, 131072, 1, 512, integer=True),
    Bound("batch", "batch B (sequences)", 1, BATCH_MAX, 1, 32, integer=True),
    Bound("usable", "usable share of GPU memory", 0.1, 1.0, 0.01, USABLE_FRACTION),
    Bound("latency_us", "all-reduce latency (µs)", 0, 1000, 0.1, LINK_LATENCY_S * 1e6),
    Bound("bw_share", "achieved share of memory bandwidth", 0.05, 1.0, 0.001,
          round(ACHIEVED_BANDWIDTH, 3)),
    Bound("flops_share", "achieved share of FLOP/s", 0.05, 1.0, 0.001, round(ACHIEVED_FLOPS, 3)),
)}
"""The hardware and model numbers (``batch``: the roofline's, not the plan's)."""

OVERHEADS: dict[str, Bound] = {b.name: b for b in (
    Bound("launch_us_per_layer", "kernel launch a layer, every pass (µs)", 0, 10000, 0.01, 0),
    Bound("allreduce_us_per_log2", "all-reduce latency a doubling of the GPUs (µs)", 0, 10000,
          0.01, 0),
    Bound("sample_row_overhead_us", "sampler a row, once a step (µs)", 0, 10000, 0.01, 0),
    Bound("step_overhead_us", "engine's fixed time a step (µs)", 0, 100000, 0.1, 0),
    Bound("draft_overhead_us", "engine's fixed time a draft pass (µs)", 0, 100000, 0.1, 0),
    Bound("spec_overhead_ms", "spec. cycle overhead, fixed (ms)", 0, 100, 0.001, 0),
    Bound("spec_row_overhead_us", "spec. cycle overhead a row (µs)", 0, 10000, 0.01, 0),
)}
"""What a step costs beyond bytes and FLOPs (:mod:`engine.analytic.overheads`): a launch time
every forward pass pays for each layer of its model, the all-reduce's depth, the sampler's
time a row once a step, the engine's fixed time a step and a draft pass, and a time a
speculative cycle pays, a fixed part and a part a row. Not given: the engine's fitted default
on the hardware (:mod:`engine.analytic.default_overheads`); ``default`` here is only the
bound's."""
OVERHEAD_FIELDS = {"launch_us_per_layer": ("launch_s_per_layer", 1e-6),
                   "allreduce_us_per_log2": ("allreduce_s_per_log2", 1e-6),
                   "sample_row_overhead_us": ("sample_s_per_row", 1e-6),
                   "step_overhead_us": ("step_fixed_s", 1e-6),
                   "draft_overhead_us": ("draft_fixed_s", 1e-6),
                   "spec_overhead_ms": ("spec_fixed_s", 1e-3),
                   "spec_row_overhead_us": ("spec_per_row_s", 1e-6)}
"""Each input's :class:`~engine.analytic.overheads.Overheads` field and its unit in s."""


def overhead_inputs(o: Overheads) -> dict[str, float]:
    """``o`` as the overhead inputs, each in its input's unit."""
    return {name: getattr(o, field) / unit for name, (field, unit) in OVERHEAD_FIELDS.items()}

PLAN_NUMBERS: dict[str, Bound] = {b.name: b for b in (
    Bound("k_max", "longest draft k_max", 1, CURVE_MAX_K, 1, K_MAX, integer=True),
    Bound("max_num_seqs", "vLLM max_num_seqs", 1, BATCH_MAX, 1, MAX_NUM_SEQS, integer=True),
    Bound("data_parallel", "vLLM data_parallel_size (replicas)", 1, 64, 1, 1, integer=True),
)}

CHOICES: dict[str, tuple[str, tuple[str, ...]]] = {
    "hardware": ("h100-sxm", tuple(HARDWARE)),
    "models": ("llama-8b-1b", tuple(PAIRS)),
    "dtype": ("bf16", DTYPES),
    # the KV cache's: "auto" is bf16 (fp32 beside fp32 weights), as int4 and fp8 weights
    # leave it; fp8 is vLLM's kv_cache_dtype="fp8"
    "kv_dtype": ("auto", ("auto", "bf16", "fp8", "fp32")),
    "draft_placement": ("sharded", ("sharded", "one-gpu")),
    "draft_sample": (DEFAULT_DRAFT_SAMPLE, DRAFT_SAMPLES),
    "drafter": ("model", tuple(DRAFTERS)),
    # the engine that serves: its fitted overheads price the plan (engine.analytic.engines)
    "engine": (engines.DEFAULT, engines.ENGINES),
}
DRAFT_PLACES = {"sharded": "sharded (as vLLM 0.32)", "one-gpu": "one GPU (not vLLM 0.32)"}
OLD_NAMES = {"draft": "draft_placement"}
"""Names older page links used: still read."""
API_OLD_NAMES = {"pair": "models", "usable_fraction": "usable",
                 "link_latency_us": "latency_us", "bandwidth_fraction": "bw_share",
                 "flops_fraction": "flops_share"}
"""Names ``GET /api/roofline`` and ``GET /api/plan`` took before: still read, deprecated
(``draft_on_one_gpu=true`` is ``draft_placement=one-gpu``)."""

# Hardware figures and model shapes a request may give instead of the preset's: bounds wide
# enough for any real model or device, narrow enough that every figure is finite.
EDITS: dict[str, tuple[str, float, float, bool]] = {
    "link_gb_s": ("GPU-to-GPU link bandwidth, GB/s each way, instead of the preset's",
                  1e-6, 1e6, False),
    "bandwidth_tb_s": ("memory bandwidth, TB/s per GPU, instead of the preset's", 1e-6, 1e6,
                       False),
    "tflops": ("peak dense TFLOP/s per GPU, for every dtype, instead of the preset's", 1e-6,
               1e6, False),
    **{f"{which}_{name}": (f"the {which}'s {words}, instead of the preset's", lo, hi, integer)
       for which in ("target", "draft")
       for name, words, lo, hi, integer in (
           ("params_b", "parameters, billions", 1e-6, 100_000, False),
           ("layers", "layers", 1, 100_000, True),
           ("heads", "attention heads", 1, 100_000, True),
           ("kv_heads", "KV heads", 1, 100_000, True),
           ("head_dim", "head size", 1, 100_000, True))},
}
SHAPE_FIELDS = ("params_b", "layers", "heads", "kv_heads", "head_dim")
_SHARE = r"[0-9]{1,6}(\.[0-9]{1,6})?"
_ENTRY = r"[1-9][0-9]{0,5}=" + _SHARE
K0_PATTERN = rf"^(cited|(10(\.0{{1,6}})?|[0-9](\.[0-9]{{1,6}})?)|{_ENTRY}(,{_ENTRY}){{0,63}})$"
"""What ``k0_overhead`` may be in a query: every value it admits parses."""
BATCH_MIX_PATTERN = rf"^({_ENTRY}([, ]{_ENTRY}){{0,1023}})?$"
"""What ``batch_mix`` may be in a query (empty: every batch once)."""
K0_HELP = ("what a k = 0 range of a schedule costs: 'cited' (the default: what a schedule "
           "adds to a step on vLLM's V1 runner, vLLM issue 49548, over a plain step; a costs "
           "file's own k0 steps come first), or, to override that for k = 0 ranges alone, a "
           "share of a step such as 0.1, or batch=share,...")
OUTPUT_TOKENS = 256
BATCH_MIX_K_HELP = ("the k the server ran while the batch mix was observed (a /watch export of "
                    "a speculating deployment): 0, the default, for a mix observed without "
                    "speculation; else the plan converts the mix to the batches the same "
                    "traffic runs at without speculation (Little's law) before it weighs it")
REQUEST_RATE_MAX = 1e6
REQUEST_RATE_HELP = ("the traffic as requests a second (Poisson arrivals) of --output-tokens "
                     "each: the plan prices the time per output token at the batches it "
                     "implies, with and without speculation (Little's law; each side at its "
                     "own batch)")
BATCH_MIX_HELP = ("the traffic's batch sizes, batch=weight,... (a histogram): the plan is "
                  "weighed against off and the best fixed k as the traffic runs; default: "
                  "every batch once")


@dataclass(frozen=True)
class PlanInputs:
    """Every input of a plan, by its one name (None: not given; the costs or the preset
    decide)."""

    hardware: str = CHOICES["hardware"][0]
    models: str = CHOICES["models"][0]
    dtype: str = CHOICES["dtype"][0]
    gpus: int = 1
    context: int = int(NUMBERS["context"].default)
    usable: float = NUMBERS["usable"].default
    latency_us: float = NUMBERS["latency_us"].default
    bw_share: float = NUMBERS["bw_share"].default
    flops_share: float = NUMBERS["flops_share"].default
    draft_placement: str = "sharded"
    link_gb_s: float | None = None
    bandwidth_tb_s: float | None = None
    tflops: float | None = None
    target_params_b: float | None = None
    target_layers: int | None = None
    target_heads: int | None = None
    target_kv_heads: int | None = None
    target_head_dim: int | None = None
    draft_params_b: float | None = None
    draft_layers: int | None = None
    draft_heads: int | None = None
    draft_kv_heads: int | None = None
    draft_head_dim: int | None = None
    launch_us_per_layer: float | None = None
    allreduce_us_per_log2: float | None = None
    sample_row_overhead_us: float | None = None
    step_overhead_us: float | None = None
    draft_overhead_us: float | None = None
    spec_overhead_ms: float | None = None
    spec_row_overhead_us: float | None = None
    alpha: float | None = 0.7
    mix: tuple[Domain, ...] = ()  # a traffic mix instead of alpha
    k_max: int = K_MAX
    max_num_seqs: int = MAX_NUM_SEQS
    data_parallel: int = 1
    draft_sample: str = DEFAULT_DRAFT_SAMPLE
    k0_overhead: str = "cited"
    batch_mix: str = ""
    drafter: str = "model"  # engine.planner.drafters.DRAFTERS
    eagle_head: str | None = None  # an EAGLE head preset (None: the target's)
    draft_kv_budget: int = STREAMING_BUDGET  # self-speculation's draft KV cache, tokens
    kv_dtype: str = CHOICES["kv_dtype"][0]
    engine: str = CHOICES["engine"][0]
    request_rate: float | None = None  # traffic as requests/s (engine.planner.traffic)
    batch_mix_k: int = 0  # the k the server ran while batch_mix was observed (0: none)
    output_tokens: int = OUTPUT_TOKENS  # tokens each request decodes, with request_rate
    positions: str = ""  # acceptance by position, survival rates (engine.analytic.positions)
    tree: str = ""  # STEPS,TOPK,DRAFT_TOKENS: a token tree for SGLang (engine.planner.tree_plan)

    def setting(self, hw: Hardware | None = None, base: Overheads | None = None) -> Setting:
        """The roofline setting: the preset (``hw``: a resolved "this machine") with the
        edits applied, and its overheads: ``base`` (None: the preset's fitted default,
        :func:`~engine.analytic.default_overheads.preset_overheads`) with every overhead
        given here in its place. Alpha and k are the Setting's defaults (callers set them)."""
        hw = hw or HARDWARE[self.hardware]
        if (self.bandwidth_tb_s, self.tflops, self.link_gb_s) != (None, None, None):
            flops = ({d: self.tflops * 1e12 for d in DTYPES} if self.tflops is not None
                     else hw.flops)
            hw = replace(hw, label=f"{hw.label} (edited)", flops=flops,
                         bandwidth=(hw.bandwidth if self.bandwidth_tb_s is None
                                    else self.bandwidth_tb_s * 1e12),
                         link_bandwidth=(hw.link_bandwidth if self.link_gb_s is None
                                         else self.link_gb_s * 1e9))
        pair = PAIRS[self.models]
        s = Setting(hw, self._edited(pair.target, "target"), self._edited(pair.draft, "draft"),
                    self.dtype, self.gpus, self.context, usable=self.usable,
                    latency_s=self.latency_us / 1e6,
                    draft_sharded=self.draft_placement == "sharded",
                    bw_share=self.bw_share, flops_share=self.flops_share,
                    kv_dtype=None if self.kv_dtype == "auto" else self.kv_dtype)
        return replace(s, overheads=self.overheads(
            preset_overheads(s, self.engine) if base is None else base))

    def overheads(self, base: Overheads) -> Overheads:
        """``base`` with the overheads given here in its place (the source says which)."""
        given = {name: getattr(self, name) for name in OVERHEAD_FIELDS
                 if getattr(self, name) is not None}
        if not given:
            return base
        changes = {OVERHEAD_FIELDS[name][0]: value * OVERHEAD_FIELDS[name][1]
                   for name, value in given.items()}
        words = ", ".join(f"{name}={_number(value)}" for name, value in given.items())
        rest = "" if len(given) == len(OVERHEAD_FIELDS) else f"; the rest {base.source}"
        return replace(base, **changes, source=f"given: {words}{rest}")

    def _edited(self, shape: ModelShape, which: str) -> ModelShape:
        changes = {f: getattr(self, f"{which}_{f}") for f in SHAPE_FIELDS
                   if getattr(self, f"{which}_{f}") is not None}
        if not changes:
            return shape
        if "params_b" in changes:  # a count given by hand is read whole by every pass
            changes["params"] = round(changes.pop("params_b") * 1e9)
            changes["input_table"] = 0
        return replace(shape, label=f"{shape.label} (edited)", **changes)

    def given(self) -> list[tuple[str, object]]:
        """The inputs that differ from the defaults, in field order (the mix as its
        entries)."""
        default = PlanInputs()
        out: list[tuple[str, object]] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "mix":
                out += [("mix", mix_entry(d)) for d in value]
            elif f.name == "alpha":
                if not self.mix and value is not None:
                    out.append(("alpha", value))
            elif value != getattr(default, f.name):
                out.append((f.name, value))
        return out

    def command(self) -> str:
        """``specscope plan ...`` with every input that is not the default: it makes the
        same plan. The alpha and the hardware are always written out."""
        parts = ["specscope", "plan"]
        if self.mix:
            by_hand = ",".join(mix_entry(d).replace(":", "=", 1) for d in self.mix)
            parts += ["--mix", shlex.quote(by_hand)]
        elif self.alpha is not None and not self.positions:
            parts += ["--alpha", _number(self.alpha)]
        shown = {"hardware", "models"}
        for name, value in self.given():
            if name in ("mix", "alpha") or name in shown:
                continue
            parts += ["--" + name.replace("_", "-"), shlex.quote(_number(value))]
        return " ".join(parts[:2] + parts[2:4] + ["--hardware", self.hardware, "--models",
                                                  self.models] + parts[4:])


def _number(value: object) -> str:
    if isinstance(value, float):
        text = f"{value:g}"
        return f"{int(value)}" if "e+" in text and value == int(value) else text
    return str(value)
