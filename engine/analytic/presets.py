"""The presets of the roofline model: model shapes (from each model's config.json), model
pairs, and hardware (from each vendor's datasheet), with the dtypes and the achieved shares of
the datasheet a real decoder reaches. Pure Python, standard library only."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

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

# Bytes per stored value. int8 and int4 are weight-only quantisation (WEIGHT_ONLY): the
# weights are dequantised on the way in and the arithmetic runs at the bf16 rate; fp8 runs on
# fp8 units where the GPU has them.
DTYPE_BYTES = {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5, "fp32": 4.0}
DTYPES = tuple(DTYPE_BYTES)
WEIGHT_ONLY = ("int8", "int4")
# int4 stores a bf16 scale and a bf16 zero point for every group of weights: 4 / G bytes a
# weight more. 128 is AWQ's and GPTQ's usual group (vLLM serves those checkpoints); gpt-fast's
# README quantises with 32, torchao's benchmarks with 64.
INT4_GROUP = 128


def weight_bytes(dtype: str, int4_group: int = INT4_GROUP) -> float:
    """Bytes one weight takes as stored, int4's group scales and zero points included."""
    return DTYPE_BYTES[dtype] + (4.0 / int4_group if dtype == "int4" else 0.0)


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
    """What the roofline needs of a model: its parameter count, its attention shape, its
    hidden size (the width of the activations tensor parallelism all-reduces; 0 means
    ``heads x head_dim``) and ``input_table``: the parameters of an input embedding table not
    shared with the LM head (``vocab x hidden`` when untied, else 0). A pass reads only the
    rows of its tokens from that table; a tied LM head reads all of it."""

    label: str
    params: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    source: str = ""
    hidden: int = 0
    input_table: int = 0
    experts: int = 0  # routed experts of a mixture-of-experts layer (0: a dense model)
    experts_per_token: int = 0  # the router's top-k
    expert_params: int = 0  # the routed experts' parameters, every layer's together
    vocab: int = 0  # rows of the LM head (0: not known, a shape given by hand)

    @property
    def width(self) -> int:
        return self.hidden or self.heads * self.head_dim

    @property
    def streamed_params(self) -> int:
        """Parameters a pass may read and multiply by: all but the input table."""
        return self.params - self.input_table

    def experts_touched(self, tokens: float) -> float:
        """The expected share of a layer's routed experts that ``tokens`` tokens reach, each
        routed to ``experts_per_token`` of ``experts`` independently and uniformly:
        ``1 - (1 - k/n)^T`` (1 for a dense model)."""
        if not self.experts:
            return 1.0
        return 1.0 - (1.0 - self.experts_per_token / self.experts) ** max(tokens, 0.0)

    def read_params(self, tokens: float) -> float:
        """Parameters a pass over ``tokens`` tokens reads: the dense ones whole, the routed
        experts only where a token reached them (verifying k + 1 tokens a row reads more
        experts than one token does, most of all at a small batch)."""
        return self.streamed_params - self.expert_params * (1.0 - self.experts_touched(tokens))

    @property
    def active_params(self) -> float:
        """Parameters one token multiplies by: the dense ones and its top-k experts."""
        if not self.experts:
            return self.streamed_params
        return self.streamed_params - self.expert_params * (
            1.0 - self.experts_per_token / self.experts)

    def kv_heads_per_gpu(self, gpus: int) -> int:
        """KV heads each of ``gpus`` GPUs holds: split while ``gpus <= kv_heads``, then one
        head each (replicated)."""
        return max(1, math.ceil(self.kv_heads / gpus))

    def kv_bytes_per_token(self, dtype: str, gpus: int = 1) -> float:
        """KV-cache bytes per token of context on one of ``gpus`` GPUs: keys and values of
        every layer, for that GPU's KV heads."""
        return 2 * self.layers * self.kv_heads_per_gpu(gpus) * self.head_dim * DTYPE_BYTES[dtype]


def moe_parameters(hidden: int, layers: int, heads: int, kv_heads: int, head_dim: int,
                   vocab: int, tied: bool, experts: int, moe_intermediate: int,
                   ) -> tuple[int, int]:
    """Parameters of a Mixtral/Qwen3-MoE decoder (every layer's MLP routed to ``experts``
    gated experts of ``moe_intermediate``, a router, no shared expert) and those of the
    routed experts alone."""
    dense = decoder_parameters(hidden, 0, layers, heads, kv_heads, head_dim, vocab, tied)
    routed = layers * experts * 3 * hidden * moe_intermediate
    return dense + routed + layers * hidden * experts, routed


def _moe(label: str, source: str, *, hidden: int, layers: int, heads: int, kv_heads: int,
         head_dim: int, vocab: int, tied: bool, experts: int, top_k: int,
         moe_intermediate: int) -> ModelShape:
    params, routed = moe_parameters(hidden, layers, heads, kv_heads, head_dim, vocab, tied,
                                    experts, moe_intermediate)
    return ModelShape(label, params, layers, heads, kv_heads, head_dim, source, hidden,
                      0 if tied else vocab * hidden, experts, top_k, routed, vocab)


def _shape(label: str, source: str, *, hidden: int, intermediate: int, layers: int, heads: int,
           kv_heads: int, head_dim: int, vocab: int, tied: bool, qkv_bias: bool = False,
           ) -> ModelShape:
    params = decoder_parameters(hidden, intermediate, layers, heads, kv_heads, head_dim, vocab,
                                tied, qkv_bias)
    return ModelShape(label, params, layers, heads, kv_heads, head_dim, source, hidden,
                      0 if tied else vocab * hidden, vocab=vocab)


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
    "qwen3-0.6b": _shape(
        "Qwen3 0.6B", "Qwen/Qwen3-0.6B config.json",
        hidden=1024, intermediate=3072, layers=28, heads=16, kv_heads=8, head_dim=128,
        vocab=151936, tied=True),
    # Mixtures of experts (num_experts or num_local_experts, num_experts_per_tok,
    # moe_intermediate_size or intermediate_size of each expert; no shared expert).
    "qwen3-30b-a3b": _moe(
        "Qwen3 30B-A3B", "Qwen/Qwen3-30B-A3B config.json",
        hidden=2048, layers=48, heads=32, kv_heads=4, head_dim=128, vocab=151936, tied=False,
        experts=128, top_k=8, moe_intermediate=768),
    "qwen3-235b-a22b": _moe(
        "Qwen3 235B-A22B", "Qwen/Qwen3-235B-A22B config.json",
        hidden=4096, layers=94, heads=64, kv_heads=4, head_dim=128, vocab=151936, tied=False,
        experts=128, top_k=8, moe_intermediate=1536),
    "mixtral-8x7b": _moe(
        "Mixtral 8x7B", "mistralai/Mixtral-8x7B-v0.1 config.json",
        hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128, vocab=32000, tied=False,
        experts=8, top_k=2, moe_intermediate=14336),
    # MiMo 7B ships one multi-token-prediction layer (num_nextn_predict_layers 1) beside its
    # 36; config.json of XiaomiMiMo/MiMo-7B-Base as mirrored in Megatron-Bridge's unit tests:
    # 4096, 11008, 36 layers, 32 heads, 8 KV heads, attention_bias, vocab 151680, untied.
    "mimo-7b": _shape(
        "MiMo 7B", "XiaomiMiMo/MiMo-7B-Base config.json",
        hidden=4096, intermediate=11008, layers=36, heads=32, kv_heads=8, head_dim=128,
        vocab=151680, tied=False, qkv_bias=True),
    # MiMo's MTP layer as a drafter: one decoder layer of the target's width after a 2H -> H
    # projection of the token's embedding and the hidden state, then the target's LM head.
    "mimo-7b-mtp": _shape(
        "MiMo 7B's MTP layer", "XiaomiMiMo/MiMo-7B-Base config.json",
        hidden=4096, intermediate=11008, layers=1, heads=32, kv_heads=8, head_dim=128,
        vocab=151680, tied=True, qkv_bias=True),
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
    "qwen3-30b-a3b-0.6b": Pair("Qwen3 30B-A3B / Qwen3 0.6B (mixture of experts)",
                               MODELS["qwen3-30b-a3b"], MODELS["qwen3-0.6b"]),
    "qwen3-235b-a22b-0.6b": Pair("Qwen3 235B-A22B / Qwen3 0.6B (mixture of experts)",
                                 MODELS["qwen3-235b-a22b"], MODELS["qwen3-0.6b"]),
    "mimo-7b-mtp": Pair("MiMo 7B / its own MTP layer", MODELS["mimo-7b"],
                        MODELS["mimo-7b-mtp"]),
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
    # A pass's reads and arithmetic one after the other, not overlapped: eager ops on a CPU
    # thread (engine.analytic.fit.fit_serial); a GPU overlaps them (the roofline's max)
    serial: bool = False

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
    # The same datasheet, 40 GB SXM: 40 GB HBM2 at 1,555 GB/s; the same tensor cores.
    "a100-40gb": Hardware("A100 40 GB", 1.555 * TB, {"bf16": 312 * TFLOP, "fp32": 19.5 * TFLOP},
                          "NVIDIA A100 datasheet", memory=40 * GB,
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


def this_machine(bandwidth: float, flops: float, serial: bool = False,
                 source: str = "fitted by specscope roofline") -> Hardware:
    """"This machine" from a measured fit (bytes/s and FLOP/s), one rate for every dtype."""
    preset = HARDWARE["this-machine"]
    return Hardware(preset.label, bandwidth, {"bf16": flops}, source,
                    memory=preset.memory, link_bandwidth=bandwidth, achieved=True,
                    serial=serial)


def devices(gpus: int, label: str) -> str:
    """The hardware in words: "one H100 SXM", "8 × H100 SXM"; "this machine" is a machine,
    not a count of devices, so it stays "this machine (...)"."""
    if label.startswith("this machine"):
        return label
    return f"one {label}" if gpus == 1 else f"{gpus} × {label}"
