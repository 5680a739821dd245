"""One forward pass on one of its tensor-parallel GPUs: bytes read, FLOPs done, the time
each alone takes and the all-reduces' time (docs/design.md, "At a batch size"); the
:class:`Setting` every roofline function reads. Pure Python, standard library only."""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.analytic.overheads import NONE, Overheads
from engine.analytic.presets import DTYPE_BYTES, INT4_GROUP, Hardware, ModelShape, weight_bytes

USABLE_FRACTION = 0.9  # of device memory: activations, CUDA graphs and fragmentation take the rest
LINK_LATENCY_S = 10e-6  # per all-reduce: NCCL's small-message latency is a few to ~20 us
ACTIVATION_BYTES = 2.0  # bf16 activations, whatever the weights' dtype


@dataclass(frozen=True)
class Setting:
    """Everything but the batch: hardware, models, dtype, GPUs, context and the draft.

    ``dtype``: the weights'; ``kv_dtype``: the KV cache's, which int4 and fp8 weights leave in
    bf16 (None: bf16, or fp32 beside fp32 weights, as a CPU runs them).
    ``draft_sharded``: the draft runs at the target's tensor-parallel degree, as vLLM 0.32
    requires (its ``draft_model.py`` refuses any other); False puts it whole on one GPU.
    ``bw_share`` and ``flops_share``: the share of the datasheet a real decoder
    reaches (ignored for hardware whose figures are already measured). ``overheads``: what a
    pass and a speculative step cost beyond bytes and FLOPs (:mod:`engine.analytic.overheads`;
    none by default: the ideal roofline)."""

    hardware: Hardware
    target: ModelShape
    draft: ModelShape
    dtype: str = "bf16"
    gpus: int = 1
    context: int = 2048
    alpha: float = 0.7
    k: int = 4
    usable: float = USABLE_FRACTION
    latency_s: float = LINK_LATENCY_S
    draft_sharded: bool = True
    bw_share: float = 1.0
    flops_share: float = 1.0
    overheads: Overheads = NONE
    kv_dtype: str | None = None
    int4_group: int = INT4_GROUP

    @property
    def weight_bytes(self) -> float:
        """Bytes one weight takes as stored (int4's group scales included)."""
        return weight_bytes(self.dtype, self.int4_group)

    @property
    def kv_cache_dtype(self) -> str:
        if self.kv_dtype is not None:
            return self.kv_dtype
        return "fp32" if self.dtype == "fp32" else "bf16"

    @property
    def draft_gpus(self) -> int:
        return self.gpus if self.draft_sharded else 1

    @property
    def gpu_bandwidth(self) -> float:
        """One GPU's achieved memory bandwidth, bytes/s."""
        share = 1.0 if self.hardware.achieved else self.bw_share
        return self.hardware.bandwidth * share

    @property
    def gpu_flops(self) -> float:
        """One GPU's achieved dense FLOP/s in this dtype."""
        share = 1.0 if self.hardware.achieved else self.flops_share
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
    would take plus the time its all-reduces take (s). ``serial``: the hardware does the
    reads and the arithmetic one after the other (:attr:`Hardware.serial`), so they add."""

    bytes: float
    flops: float
    memory_s: float
    compute_s: float
    communication_s: float = 0.0
    serial: bool = False

    @property
    def seconds(self) -> float:
        if self.serial:
            return self.memory_s + self.compute_s + self.communication_s
        return max(self.memory_s, self.compute_s) + self.communication_s

    @property
    def bound(self) -> str:
        """Whichever of memory, compute and communication takes longest."""
        times = {"memory": self.memory_s, "compute": self.compute_s,
                 "communication": self.communication_s}
        return max(times, key=lambda name: times[name])  # ties: memory, then compute


def all_reduce_seconds(s: Setting, gpus: int, batch: float, tokens: int, hidden: int) -> float:
    """One ring all-reduce of ``batch x tokens x hidden`` bf16 activations over ``gpus`` GPUs:
    ``2 (G - 1) / G`` of the bytes through each link, plus the link's latency and the
    overheads' latency for each doubling of the GPUs."""
    if gpus == 1:
        return 0.0
    size = batch * tokens * hidden * ACTIVATION_BYTES
    depth = s.overheads.allreduce_s_per_log2 * math.log2(gpus)
    return (2 * (gpus - 1) / gpus * size / s.hardware.link_bandwidth + s.latency_s
            + depth)


def forward_pass(model: ModelShape, s: Setting, batch: float, tokens: int,
                 gpus: int | None = None) -> Pass:
    """``batch`` sequences of ``tokens`` new tokens each, after ``s.context`` cached tokens,
    split over ``gpus`` tensor-parallel GPUs (``s.gpus`` unless given). Bytes: the weights
    but an untied input table (of a mixture of experts, the experts the pass's tokens reach),
    the table's rows of the pass's tokens (in the activations' bf16) and the KV cache in its
    own dtype; FLOPs: the weights' each token multiplies by and attention's."""
    g = s.gpus if gpus is None else gpus
    rows = batch * tokens * model.width * ACTIVATION_BYTES if model.input_table else 0.0
    kv = batch * s.context * model.kv_bytes_per_token(s.kv_cache_dtype, g)
    # a mixture of experts reads the experts its batch x tokens reach (ModelShape.read_params)
    weights = model.read_params(batch * tokens) * s.weight_bytes / g
    read = weights + rows / g + kv
    # a weight-only kernel reads its weights at its own share of the bandwidth
    memory = (weights / s.overheads.kernel_share(s.dtype) + rows / g + kv) / s.gpu_bandwidth
    attention = 4 * s.context * model.heads * model.head_dim * model.layers
    flops = batch * tokens * (2 * model.active_params + attention) / g
    communication = 2 * model.layers * all_reduce_seconds(s, g, batch, tokens, model.width)
    return Pass(read, flops, memory, flops / s.gpu_flops, communication, s.hardware.serial)


def target_pass(s: Setting, batch: float, tokens: int = 1) -> Pass:
    return forward_pass(s.target, s, batch, tokens)


def draft_pass(s: Setting, batch: float) -> Pass:
    """One draft step, on the GPUs the draft runs on."""
    return forward_pass(s.draft, s, batch, 1, s.draft_gpus)


def ridge_tokens(s: Setting) -> float:
    """Tokens per pass (``B T``) at which the weights' arithmetic meets the hardware's ridge:
    ``2 N B T / (N b) = F / BW``, i.e. ``B T = F b / (2 BW)`` (KV reads and attention aside)."""
    return s.flops * DTYPE_BYTES[s.dtype] / (2 * s.bandwidth)
