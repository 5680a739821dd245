"""Batch size and hardware: the roofline model of speculative decoding, in pure Python.

The slider model (:mod:`engine.analytic.theory`) prices a cycle in target steps. This module
says what those steps cost on given hardware at batch ``B`` (docs/design.md, "At a batch
size"). One forward pass of a model with ``N`` parameters of ``b`` bytes, over ``B``
sequences of ``T`` new tokens each, with ``L`` tokens of context in the KV cache:

- bytes read: ``N b + B L kv``, ``kv = 2 x layers x kv_heads x head_dim x b`` per token
  (the KV cache is stored in the same dtype as the weights)
- arithmetic: ``2 N B T`` for the weights plus ``4 B T L heads head_dim layers`` for attention
  (scores and the weighted sum over the cached context; included, because at long contexts it
  outgrows the weights' share)
- time: ``max(bytes / BW, FLOPs / F) + communication`` with ``BW`` and ``F`` one GPU's memory
  bandwidth and dense FLOP/s (the datasheet's times an achieved fraction), bytes and FLOPs those
  of one of the ``G`` tensor-parallel GPUs
- communication (``G > 1``): two all-reduces a layer (after attention, after the MLP) of the
  pass's ``B x T x hidden`` activations in bf16 (2 bytes, whatever the weights' dtype: fp8 and
  int4 weights still compute in bf16). A ring all-reduce moves ``2 (G - 1) / G`` of those bytes
  through each GPU's link at its per-direction bandwidth, plus a fixed latency per all-reduce.
  Decode overlaps it poorly, so it adds to the pass.

``N`` counts every parameter, embeddings included, as the formula in docs/design.md does.

Memory capacity (docs/design.md, "Memory capacity and tensor parallelism"): per GPU, the
weights of both models divided by the tensor-parallel degree ``G`` plus the KV cache of both
models for ``B`` sequences of ``L + k + 1`` tokens, against the device's memory times a usable
fraction. KV heads split across GPUs only while ``G <= kv_heads``; past that each GPU keeps one
head (vLLM replicates them), so the KV cache stops shrinking.
All ``B`` sequences draft and verify in lockstep, so the throughput speedup at batch ``B`` is
``S(B) = E[tokens per cycle] / (k c(B) + v(B))`` with ``c(B) = t_q(B,1) / t_p(B,1)`` and
``v(B) = t_p(B,k+1) / t_p(B,1)``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from engine.analytic import lookup
from engine.analytic.theory import CURVE_MAX_K, expected_tokens

BATCH_MAX = 1024
CURVE_BATCHES = tuple(2**i for i in range(11))  # 1, 2, 4, ..., 1024
FIT_SEARCH_MAX = 65_536  # max_batch_that_fits looks no further
USABLE_FRACTION = 0.9  # of device memory: activations, CUDA graphs and fragmentation take the rest
LINK_LATENCY_S = 10e-6  # per all-reduce: NCCL's small-message latency is a few to ~20 us
ACTIVATION_BYTES = 2.0  # bf16 activations, whatever the weights' dtype

# Achieved, not peak: real decoders reach a share of the datasheet. The page and the API start
# from these; the engine's Setting defaults to the datasheet (fraction 1).
# Bandwidth: gpt-fast's README (pytorch-labs/gpt-fast) measures Llama-2-7B in bf16 on an A100
# 80 GB at 104.9 tok/s, i.e. 1,397 GB/s of the sheet's 2,039 (it calls ~1,700 the empirical peak).
ACHIEVED_BANDWIDTH = round(1397 / 2039, 3)  # 0.685, at the page control's step
# FLOP/s: the largest bf16 matmul throughput found by brute force over shapes, "Maximum
# Achievable Matmul FLOPS" (stas00/ml-engineering, compute/accelerator/README.md): H100 SXM
# 792.1 of 989 TFLOPS (80.1%); A100 SXM 85.9%, MI300X 60.1%. A decoder's matmuls are no larger,
# so this is a ceiling; we take the H100's share for every preset.
ACHIEVED_FLOPS = round(792.1 / 989, 3)  # 0.801
GB = 1e9  # vendors' gigabytes

# Bytes per stored value. int4 is weight-only quantisation: the arithmetic runs at the bf16 rate.
DTYPE_BYTES = {"bf16": 2.0, "fp8": 1.0, "int4": 0.5, "fp32": 4.0}
DTYPES = tuple(DTYPE_BYTES)


# ---- model shapes ----------------------------------------------------------------------------


def decoder_parameters(
    hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int, head_dim: int,
    vocab: int, tied: bool, qkv_bias: bool = False,
) -> int:
    """Parameters of a Llama/Qwen2 decoder from its config.json values: embeddings, per layer
    q/k/v/o projections (with Qwen2's q/k/v biases), the gated MLP and two RMSNorms, the final
    norm, and the output head unless it is tied to the embeddings."""
    q, kv = heads * head_dim, kv_heads * head_dim
    attention = hidden * q + 2 * hidden * kv + q * hidden + ((q + 2 * kv) if qkv_bias else 0)
    per_layer = attention + 3 * hidden * intermediate + 2 * hidden
    return vocab * hidden * (1 if tied else 2) + layers * per_layer + hidden


@dataclass(frozen=True)
class ModelShape:
    """What the roofline needs of a model: its parameter count, its attention shape and its
    hidden size (the width of the activations tensor parallelism all-reduces; 0 means
    ``heads x head_dim``)."""

    label: str
    params: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    source: str = ""
    hidden: int = 0

    @property
    def width(self) -> int:
        return self.hidden or self.heads * self.head_dim

    def kv_heads_per_gpu(self, gpus: int) -> int:
        """KV heads each of ``gpus`` GPUs holds: split while ``gpus <= kv_heads``, then one
        head each (replicated)."""
        return max(1, math.ceil(self.kv_heads / gpus))

    def kv_bytes_per_token(self, dtype: str, gpus: int = 1) -> float:
        """KV-cache bytes per token of context on one of ``gpus`` GPUs: keys and values of
        every layer, for that GPU's KV heads."""
        return 2 * self.layers * self.kv_heads_per_gpu(gpus) * self.head_dim * DTYPE_BYTES[dtype]


def _shape(label: str, source: str, *, hidden: int, intermediate: int, layers: int, heads: int,
           kv_heads: int, head_dim: int, vocab: int, tied: bool, qkv_bias: bool = False,
           ) -> ModelShape:
    params = decoder_parameters(hidden, intermediate, layers, heads, kv_heads, head_dim, vocab,
                                tied, qkv_bias)
    return ModelShape(label, params, layers, heads, kv_heads, head_dim, source, hidden)


# Values copied from each model's config.json on the Hugging Face hub (hidden_size,
# intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim or
# hidden_size / num_attention_heads, vocab_size, tie_word_embeddings; Qwen2 has q/k/v biases).
MODELS: dict[str, ModelShape] = {
    "llama-3.1-70b": _shape(
        "Llama 3.1 70B", "meta-llama/Llama-3.1-70B config.json",
        hidden=8192, intermediate=28672, layers=80, heads=64, kv_heads=8, head_dim=128,
        vocab=128256, tied=False),
    "llama-3.1-8b": _shape(
        "Llama 3.1 8B", "meta-llama/Llama-3.1-8B config.json",
        hidden=4096, intermediate=14336, layers=32, heads=32, kv_heads=8, head_dim=128,
        vocab=128256, tied=False),
    "llama-3.2-1b": _shape(
        "Llama 3.2 1B", "meta-llama/Llama-3.2-1B config.json",
        hidden=2048, intermediate=8192, layers=16, heads=32, kv_heads=8, head_dim=64,
        vocab=128256, tied=True),
    "qwen2.5-7b": _shape(
        "Qwen2.5 7B", "Qwen/Qwen2.5-7B config.json",
        hidden=3584, intermediate=18944, layers=28, heads=28, kv_heads=4, head_dim=128,
        vocab=152064, tied=False, qkv_bias=True),
    "qwen2.5-0.5b": _shape(
        "Qwen2.5 0.5B", "Qwen/Qwen2.5-0.5B config.json",
        hidden=896, intermediate=4864, layers=24, heads=14, kv_heads=2, head_dim=64,
        vocab=151936, tied=True, qkv_bias=True),
    "shipped-target": _shape(
        "the shipped target", "models/target/config.json",
        hidden=256, intermediate=768, layers=8, heads=4, kv_heads=4, head_dim=64,
        vocab=4096, tied=True),
    "shipped-draft": _shape(
        "the shipped draft", "models/draft/config.json",
        hidden=128, intermediate=384, layers=1, heads=2, kv_heads=2, head_dim=64,
        vocab=4096, tied=True),
}


@dataclass(frozen=True)
class Pair:
    label: str
    target: ModelShape
    draft: ModelShape


PAIRS: dict[str, Pair] = {
    "llama-70b-1b": Pair("Llama 3.1 70B / Llama 3.2 1B", MODELS["llama-3.1-70b"],
                         MODELS["llama-3.2-1b"]),
    "llama-8b-1b": Pair("Llama 3.1 8B / Llama 3.2 1B", MODELS["llama-3.1-8b"],
                        MODELS["llama-3.2-1b"]),
    "qwen-7b-0.5b": Pair("Qwen2.5 7B / Qwen2.5 0.5B", MODELS["qwen2.5-7b"],
                         MODELS["qwen2.5-0.5b"]),
    "shipped": Pair("shipped pair (8M / 0.7M)", MODELS["shipped-target"],
                    MODELS["shipped-draft"]),
}


# ---- hardware --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hardware:
    """Memory bandwidth in bytes/s, peak dense FLOP/s per dtype and memory in bytes, for one
    device.

    A dtype the device has no faster units for runs at the bf16 rate (int4 weights are
    dequantised to bf16; the A100 has no fp8 units)."""

    label: str
    bandwidth: float
    flops: dict[str, float]
    source: str = ""
    memory: float = math.inf  # bytes; inf: not a limit the model knows
    link_bandwidth: float = math.inf  # bytes/s each way between GPUs; inf: free
    achieved: bool = False  # the figures are measured ones: no achieved fraction applies

    def peak_flops(self, dtype: str) -> float:
        return self.flops.get(dtype, self.flops["bf16"])


TB, TFLOP = 1e12, 1e12


def physical_memory() -> float:
    """This machine's RAM in bytes (POSIX sysconf; inf where the platform does not say)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return math.inf


HARDWARE: dict[str, Hardware] = {
    # Links: the sheets give NVLink bandwidth both ways together (H100/H200 900 GB/s, A100
    # 600 GB/s) and the L4's PCIe Gen4 x16 as 64 GB/s; each way is half. AMD's MI300X sheet gives
    # 128 GB/s per Infinity Fabric link (64 each way) and 7 links to its peers: 448 GB/s each way.
    # NVIDIA H100 Tensor Core GPU datasheet (SXM): 80 GB HBM3 at 3.35 TB/s; BF16 1,979 and FP8 3,958
    # TFLOPS "with sparsity", so 989 and 1,979 dense; FP32 67 TFLOPS.
    "h100-sxm": Hardware("H100 SXM", 3.35 * TB,
                         {"bf16": 989 * TFLOP, "fp8": 1979 * TFLOP, "fp32": 67 * TFLOP},
                         "NVIDIA H100 datasheet", memory=80 * GB,
                         link_bandwidth=450 * GB),
    # NVIDIA H200 datasheet (SXM): 141 GB HBM3e at 4.8 TB/s; the same tensor cores as the H100 SXM.
    "h200": Hardware("H200", 4.8 * TB,
                     {"bf16": 989 * TFLOP, "fp8": 1979 * TFLOP, "fp32": 67 * TFLOP},
                     "NVIDIA H200 datasheet", memory=141 * GB,
                     link_bandwidth=450 * GB),
    # NVIDIA A100 datasheet (80 GB SXM): 80 GB HBM2e at 2,039 GB/s; BF16 312 TFLOPS dense (624
    # sparse); FP32 19.5 TFLOPS; no FP8.
    "a100-80gb": Hardware("A100 80 GB", 2.039 * TB, {"bf16": 312 * TFLOP, "fp32": 19.5 * TFLOP},
                          "NVIDIA A100 datasheet", memory=80 * GB,
                          link_bandwidth=300 * GB),
    # NVIDIA L4 datasheet: 24 GB GDDR6 at 300 GB/s; BF16 242 and FP8 485 TFLOPS "with sparsity",
    # so 121 and 242.5 dense; FP32 30.3 TFLOPS.
    "l4": Hardware("L4", 0.300 * TB,
                   {"bf16": 121 * TFLOP, "fp8": 242.5 * TFLOP, "fp32": 30.3 * TFLOP},
                   "NVIDIA L4 datasheet", memory=24 * GB,
                   link_bandwidth=32 * GB),
    # AMD Instinct MI300X datasheet: 192 GB HBM3 at 5.3 TB/s; BF16 1,307.4 and FP8 2,614.9
    # TFLOPS dense; FP32 (vector) 163.4 TFLOPS.
    "mi300x": Hardware("MI300X", 5.3 * TB,
                       {"bf16": 1307.4 * TFLOP, "fp8": 2614.9 * TFLOP, "fp32": 163.4 * TFLOP},
                       "AMD Instinct MI300X datasheet", memory=192 * GB,
                       link_bandwidth=7 * 64 * GB),
    # This project's 2-core CPU machine with the shipped pair (float32, one torch thread), as
    # fitted by `specscope roofline` (measurements/shipped-cpu.json, "fit"); the page replaces
    # these with the fit of a loaded measurement when there is one. One rate for every dtype:
    # the CPU runs them all through float32 kernels. Its memory is the machine's RAM; "GPUs"
    # here would share it, so their all-reduces go through memory at its bandwidth.
    "this-machine": Hardware("this machine (2-core CPU)", 2.69e9, {"bf16": 28.2e9},
                             "measurements/shipped-cpu.json", memory=physical_memory(),
                             link_bandwidth=2.69e9, achieved=True),
}


def this_machine(bandwidth: float, flops: float) -> Hardware:
    """"This machine" from a measured fit (bytes/s and FLOP/s), one rate for every dtype."""
    preset = HARDWARE["this-machine"]
    return Hardware(preset.label, bandwidth, {"bf16": flops}, "fitted by specscope roofline",
                    memory=preset.memory, link_bandwidth=bandwidth, achieved=True)


# ---- one pass --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """Everything but the batch: hardware, models, dtype, GPUs, context and the draft.

    ``draft_sharded``: the draft runs at the target's tensor-parallel degree, as vLLM 0.32
    requires (its ``draft_model.py`` refuses any other); False puts it whole on one GPU.
    ``bandwidth_fraction`` and ``flops_fraction``: the share of the datasheet a real decoder
    reaches (ignored for hardware whose figures are already measured)."""

    hardware: Hardware
    target: ModelShape
    draft: ModelShape
    dtype: str = "bf16"
    gpus: int = 1
    context: int = 2048
    alpha: float = 0.7
    k: int = 4
    usable_fraction: float = USABLE_FRACTION
    link_latency_s: float = LINK_LATENCY_S
    draft_sharded: bool = True
    bandwidth_fraction: float = 1.0
    flops_fraction: float = 1.0

    @property
    def draft_gpus(self) -> int:
        return self.gpus if self.draft_sharded else 1

    @property
    def gpu_bandwidth(self) -> float:
        """One GPU's achieved memory bandwidth, bytes/s."""
        share = 1.0 if self.hardware.achieved else self.bandwidth_fraction
        return self.hardware.bandwidth * share

    @property
    def gpu_flops(self) -> float:
        """One GPU's achieved dense FLOP/s in this dtype."""
        share = 1.0 if self.hardware.achieved else self.flops_fraction
        return self.hardware.peak_flops(self.dtype) * share

    @property
    def bandwidth(self) -> float:
        return self.gpu_bandwidth * self.gpus

    @property
    def flops(self) -> float:
        return self.gpu_flops * self.gpus


@dataclass(frozen=True)
class Pass:
    """One forward pass on one of its GPUs: bytes read, FLOPs done, and the time each alone
    would take plus the time its all-reduces take (s)."""

    bytes: float
    flops: float
    memory_s: float
    compute_s: float
    communication_s: float = 0.0

    @property
    def seconds(self) -> float:
        return max(self.memory_s, self.compute_s) + self.communication_s

    @property
    def bound(self) -> str:
        """Whichever of memory, compute and communication takes longest."""
        times = {"memory": self.memory_s, "compute": self.compute_s,
                 "communication": self.communication_s}
        return max(times, key=lambda name: times[name])  # ties: memory, then compute


def all_reduce_seconds(s: Setting, gpus: int, batch: float, tokens: int, hidden: int) -> float:
    """One ring all-reduce of ``batch x tokens x hidden`` bf16 activations over ``gpus`` GPUs:
    ``2 (G - 1) / G`` of the bytes through each link, plus the fixed latency."""
    if gpus == 1:
        return 0.0
    size = batch * tokens * hidden * ACTIVATION_BYTES
    return 2 * (gpus - 1) / gpus * size / s.hardware.link_bandwidth + s.link_latency_s


def forward_pass(model: ModelShape, s: Setting, batch: float, tokens: int,
                 gpus: int | None = None) -> Pass:
    """``batch`` sequences of ``tokens`` new tokens each, after ``s.context`` cached tokens,
    split over ``gpus`` tensor-parallel GPUs (``s.gpus`` unless given)."""
    g = s.gpus if gpus is None else gpus
    b = DTYPE_BYTES[s.dtype]
    read = model.params * b / g + batch * s.context * model.kv_bytes_per_token(s.dtype, g)
    attention = 4 * s.context * model.heads * model.head_dim * model.layers
    flops = batch * tokens * (2 * model.params + attention) / g
    communication = 2 * model.layers * all_reduce_seconds(s, g, batch, tokens, model.width)
    return Pass(read, flops, read / s.gpu_bandwidth, flops / s.gpu_flops, communication)


def target_pass(s: Setting, batch: float, tokens: int = 1) -> Pass:
    return forward_pass(s.target, s, batch, tokens)


def draft_pass(s: Setting, batch: float) -> Pass:
    """One draft step, on the GPUs the draft runs on."""
    return forward_pass(s.draft, s, batch, 1, s.draft_gpus)


def ridge_tokens(s: Setting) -> float:
    """Tokens per pass (``B T``) at which the weights' arithmetic meets the hardware's ridge:
    ``2 N B T / (N b) = F / BW``, i.e. ``B T = F b / (2 BW)`` (KV reads and attention aside)."""
    return s.flops * DTYPE_BYTES[s.dtype] / (2 * s.bandwidth)


# ---- memory capacity -------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """Bytes on one GPU at batch ``B``: weights, KV cache, their sum and what is usable."""

    weights: float
    kv_cache: float
    available: float

    @property
    def total(self) -> float:
        return self.weights + self.kv_cache

    @property
    def fits(self) -> bool:
        return self.total <= self.available


def _weights_and_kv_per_sequence(s: Setting, with_draft: bool = True) -> tuple[float, float]:
    """Bytes of weights on one GPU, and KV-cache bytes one sequence of ``L + k + 1`` tokens
    adds to it: both models, each split ``G`` ways (KV heads as far as they go); a draft that
    is not sharded sits whole on the first GPU, the one this counts."""
    b = DTYPE_BYTES[s.dtype]
    models = ((s.target, s.gpus), (s.draft, s.draft_gpus)) if with_draft else ((s.target, s.gpus),)
    weights = sum(m.params * b / g for m, g in models)
    per_token = sum(m.kv_bytes_per_token(s.dtype, g) for m, g in models)
    return weights, (s.context + s.k + 1) * per_token


def memory_at(s: Setting, batch: float) -> Memory:
    """What one GPU holds at batch ``B``: ``(N_p + N_q) b / G + B (L + k + 1)(kv_p + kv_q)``
    with the KV bytes per GPU, against ``memory x usable_fraction``."""
    weights, per_sequence = _weights_and_kv_per_sequence(s)
    return Memory(weights, batch * per_sequence, s.hardware.memory * s.usable_fraction)


def max_batch_that_fits(s: Setting, limit: int = FIT_SEARCH_MAX,
                        with_draft: bool = True) -> int | None:
    """The largest batch in ``1..limit`` whose weights and KV cache fit on each GPU, or None
    when even batch 1 does not. ``with_draft=False`` asks the same of plain decoding (the
    target alone), so the difference is the capacity price of speculating."""
    weights, per_sequence = _weights_and_kv_per_sequence(s, with_draft)
    available = s.hardware.memory * s.usable_fraction

    def fits(batch: int) -> bool:
        return weights + batch * per_sequence <= available

    if not fits(1):
        return None
    if math.isinf(available) or fits(limit):
        return limit
    # Memory is linear in B: the floor of the quotient, then a step either way for rounding.
    most = max(1, min(limit, math.floor((available - weights) / per_sequence)))
    while not fits(most):
        most -= 1
    while most < limit and fits(most + 1):
        most += 1
    return most


# ---- speculation at batch B ------------------------------------------------------------------


def costs(s: Setting, batch: float, k: int | None = None) -> tuple[float, float]:
    """``c(B)`` and ``v(B)``: the draft step and the verification pass over ``k + 1``
    positions, in target decode steps at batch ``B``."""
    k = s.k if k is None else k
    step = target_pass(s, batch).seconds
    return draft_pass(s, batch).seconds / step, target_pass(s, batch, k + 1).seconds / step


def speedup_at(s: Setting, batch: float, k: int | None = None) -> float:
    """Throughput speedup ``S(B)`` of speculation over plain decoding at batch ``B``."""
    k = s.k if k is None else k
    c, v = costs(s, batch, k)
    return expected_tokens(s.alpha, k) / (k * c + v)


def best_k_at(s: Setting, batch: float) -> tuple[int, float]:
    """The k in 1..16 with the highest ``S(B)``; ties go to the smaller k."""
    best = (1, speedup_at(s, batch, 1))
    for k in range(2, CURVE_MAX_K + 1):
        value = speedup_at(s, batch, k)
        if value > best[1]:
            best = (k, value)
    return best


def lookup_speedup_at(s: Setting, batch: float, pi: float, k: int | None = None) -> float:
    """Prompt lookup's ``S(B)``: no draft pass (the lookup runs on the host, taken as free:
    c = 0), and a verification pass over ``k + 1`` positions in a share ``pi`` of cycles,
    a plain target step in the others (:func:`engine.analytic.lookup.speedup` with
    ``v = v(B)``)."""
    k = s.k if k is None else k
    step = target_pass(s, batch).seconds
    v = target_pass(s, batch, k + 1).seconds / step
    return lookup.speedup(s.alpha, k, pi, 0.0, v)


def _deficit_pieces(s: Setting, draft: bool = True) -> tuple[list[float], object]:
    """``f(B) = k t_q(B,1) + t_p(B,k+1) - E t_p(B,1)``, with ``S(B) <= 1`` exactly when
    ``f(B) >= 0``, and the batches where f changes slope. Every time is the larger of two
    lines in B plus a third line (communication), so f is linear between those batches.
    ``draft=False``: prompt lookup, without the draft term (its ``S(B) <= 1`` exactly when
    ``v(B) >= E``, whatever its share of cycles with a proposal)."""
    tokens = expected_tokens(s.alpha, s.k)
    drafts = s.k if draft else 0

    def f(batch: float) -> float:
        return (drafts * draft_pass(s, batch).seconds + target_pass(s, batch, s.k + 1).seconds
                - tokens * target_pass(s, batch).seconds)

    knees = []
    passes = [(s.target, s.k + 1, s.gpus), (s.target, 1, s.gpus)]
    if draft:
        passes.append((s.draft, 1, s.draft_gpus))
    for model, n, gpus in passes:
        # memory time a + m B meets compute time g B at B = a / (g - m); communication adds
        # a line in B and moves no knee
        at0, at1 = forward_pass(model, s, 0, n, gpus), forward_pass(model, s, 1, n, gpus)
        a, m = at0.memory_s, at1.memory_s - at0.memory_s
        g = at1.compute_s
        if g > m:
            knees.append(a / (g - m))
    return sorted(knees), f


def break_even_batch(s: Setting, batch_max: int = BATCH_MAX) -> int | None:
    """The smallest whole batch in ``1..batch_max`` with ``S(B) <= 1``, or None when
    speculation pays at every batch up to ``batch_max``.

    Found segment by segment between the knees of the piecewise-linear ``f`` (see
    :func:`_deficit_pieces`), not by trying every batch."""
    return _first_losing_batch(s, batch_max, draft=True)


def lookup_break_even_batch(s: Setting, batch_max: int = BATCH_MAX) -> int | None:
    """:func:`break_even_batch` for prompt lookup: the smallest batch with ``v(B) >= E(T)``.
    It has no draft passes to pay for, so it is never below the draft model's, and with the
    lookup free it is the same for every share ``pi > 0`` of cycles with a proposal (at
    ``pi = 0`` nothing is proposed and ``S = 1`` at every batch)."""
    return _first_losing_batch(s, batch_max, draft=False)


def _first_losing_batch(s: Setting, batch_max: int, draft: bool) -> int | None:
    knees, f = _deficit_pieces(s, draft)

    def loses(batch: int) -> bool:
        return (speedup_at(s, batch) if draft else lookup_speedup_at(s, batch, 1.0)) <= 1.0

    edges = [1.0] + [x for x in knees if 1.0 < x < batch_max] + [float(batch_max)]
    for lo, hi in zip(edges, edges[1:], strict=False):
        first = math.ceil(lo)
        if first > hi:
            continue
        if loses(first):
            return first
        f_lo, f_hi = f(lo), f(hi)
        if f_hi > f_lo:  # rising on this segment: it crosses zero once, at most
            root = lo + (hi - lo) * (-f_lo) / (f_hi - f_lo)
            for candidate in (math.ceil(root), math.ceil(root) + 1):  # +1: rounding at the root
                if first <= candidate <= math.floor(hi) and loses(candidate):
                    return candidate
    return None


@dataclass(frozen=True)
class CurvePoint:
    batch: int
    speedup: float
    c: float
    v: float
    fits: bool  # whether the weights and KV cache at this batch fit in memory


@dataclass(frozen=True)
class PassTimes:
    """One pass's three times (ms) on one of its GPUs, its total and what bounds it."""

    memory_ms: float
    compute_ms: float
    communication_ms: float
    ms: float
    bound: str
    gpus: int

    @classmethod
    def of(cls, p: Pass, gpus: int) -> PassTimes:
        return cls(p.memory_s * 1000, p.compute_s * 1000, p.communication_s * 1000,
                   p.seconds * 1000, p.bound, gpus)


@dataclass(frozen=True)
class Roofline:
    """Everything the roofline section and ``GET /api/roofline`` show at batch ``B``."""

    batch: int
    t_target_ms: float
    t_verify_ms: float
    t_draft_ms: float
    c: float
    v: float
    speedup: float
    tok_s_base: float  # per sequence
    tok_s_spec: float
    tok_s_base_total: float  # all B sequences
    tok_s_spec_total: float
    break_even_batch: int | None
    # Prompt lookup verifying with the same target: no draft passes, so it breaks even later.
    lookup_break_even_batch: int | None
    ridge_tokens: float
    ridge_batch: float  # the batch at which the verification pass reaches the ridge
    bound: str  # of the verification pass: "memory", "compute" or "communication"
    target_bound: str
    draft_bound: str
    best_k: int
    best_speedup: float
    curve: list[CurvePoint]
    fits: bool
    memory_gb_per_gpu: float
    memory_gb_available: float
    weights_gb_per_gpu: float
    kv_cache_gb_per_gpu: float
    max_batch_that_fits: int | None  # searched up to FIT_SEARCH_MAX
    max_batch_without_draft: int | None  # the same for plain decoding (the target alone)
    target_pass: PassTimes
    verify_pass: PassTimes
    draft_pass: PassTimes


def roofline(s: Setting, batch: int) -> Roofline:
    target = target_pass(s, batch)
    verify = target_pass(s, batch, s.k + 1)
    draft = draft_pass(s, batch)
    c, v = draft.seconds / target.seconds, verify.seconds / target.seconds
    speedup = expected_tokens(s.alpha, s.k) / (s.k * c + v)
    base = 1.0 / target.seconds
    k_best, s_best = best_k_at(s, batch)
    ridge = ridge_tokens(s)
    most = max_batch_that_fits(s)
    curve = [CurvePoint(b, speedup_at(s, b), *costs(s, b), most is not None and b <= most)
             for b in CURVE_BATCHES]
    memory = memory_at(s, batch)
    return Roofline(
        batch=batch,
        t_target_ms=target.seconds * 1000,
        t_verify_ms=verify.seconds * 1000,
        t_draft_ms=draft.seconds * 1000,
        c=c,
        v=v,
        speedup=speedup,
        tok_s_base=base,
        tok_s_spec=base * speedup,
        tok_s_base_total=base * batch,
        tok_s_spec_total=base * speedup * batch,
        break_even_batch=break_even_batch(s),
        lookup_break_even_batch=lookup_break_even_batch(s),
        ridge_tokens=ridge,
        ridge_batch=ridge / (s.k + 1),
        bound=verify.bound,
        target_bound=target.bound,
        draft_bound=draft.bound,
        best_k=k_best,
        best_speedup=s_best,
        curve=curve,
        fits=memory.fits,
        memory_gb_per_gpu=memory.total / GB,
        memory_gb_available=memory.available / GB,
        weights_gb_per_gpu=memory.weights / GB,
        kv_cache_gb_per_gpu=memory.kv_cache / GB,
        max_batch_that_fits=most,
        max_batch_without_draft=max_batch_that_fits(s, with_draft=False),
        target_pass=PassTimes.of(target, s.gpus),
        verify_pass=PassTimes.of(verify, s.gpus),
        draft_pass=PassTimes.of(draft, s.draft_gpus),
    )


# ---- fitting "this machine" ------------------------------------------------------------------


@dataclass(frozen=True)
class TimedPass:
    """One measured forward pass: ``model`` over ``batch`` x ``tokens`` after ``context``."""

    model: ModelShape
    batch: int
    tokens: int
    context: int
    seconds: float


def fit_hardware(passes: list[TimedPass], dtype: str = "fp32", steps: int = 160,
                 ) -> tuple[float, float]:
    """The bandwidth (bytes/s) and FLOP/s whose roofline best explains ``passes``: least
    squares on log time, over a log grid from 1e7 to 1e15 (then refined tenfold around the
    best cell). Whatever a pass costs beyond bytes and FLOPs (kernel launches, Python) lands
    in a lower bandwidth: the fit says how the machine behaves, not what its datasheet says."""
    counts = []
    for p in passes:
        s = Setting(Hardware("fit", 1.0, {"bf16": 1.0}), p.model, p.model, dtype,
                    context=p.context)
        one = forward_pass(p.model, s, p.batch, p.tokens)
        counts.append((one.bytes, one.flops, math.log(p.seconds)))

    def error(log_bw: float, log_f: float) -> float:
        bw, f = math.exp(log_bw), math.exp(log_f)
        return sum((math.log(max(b / bw, fl / f)) - t) ** 2 for b, fl, t in counts)

    lo, hi = math.log(1e7), math.log(1e15)
    grid = [lo + (hi - lo) * i / steps for i in range(steps + 1)]
    best = min(((error(a, b), a, b) for a in grid for b in grid[::4]), key=lambda e: e[0])
    cell = (hi - lo) / steps * 4
    fine = [cell * (i / 20 - 1) for i in range(41)]
    best = min(((error(best[1] + da, best[2] + db), best[1] + da, best[2] + db)
                for da in fine for db in fine), key=lambda e: e[0])
    return math.exp(best[1]), math.exp(best[2])
