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

The model is split by job: :mod:`~engine.analytic.presets` (model shapes, pairs, hardware),
:mod:`~engine.analytic.passes` (one pass and the :class:`Setting`),
:mod:`~engine.analytic.memory` (what fits), :mod:`~engine.analytic.break_even` (``c(B)``,
``v(B)``, ``S(B)``, the best k and the break-even search) and :mod:`~engine.analytic.fit`
(fitting "this machine"). This module puts them together into what the batch section and
``GET /api/roofline`` show at one batch; each name is imported from its own module.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.analytic.break_even import (
    best_k_at,
    break_even_batch,
    costs,
    lookup_break_even_batch,
    speedup_at,
    step_s,
)
from engine.analytic.memory import (
    max_batch_that_fits,
    memory_at,
)
from engine.analytic.overheads import (
    draft_overhead_s,
    launch_s,
    sample_s,
    spec_step_overhead_s,
)
from engine.analytic.passes import (
    Pass,
    Setting,
    draft_pass,
    ridge_tokens,
    target_pass,
)
from engine.analytic.presets import (
    GB,
)
from engine.analytic.theory import expected_tokens

CURVE_BATCHES = tuple(2**i for i in range(11))  # 1, 2, 4, ..., 1024


@dataclass(frozen=True)
class CurvePoint:
    batch: int
    speedup: float
    c: float
    v: float
    fits: bool  # whether the weights and KV cache at this batch fit in memory


@dataclass(frozen=True)
class PassTimes:
    """One pass's three times (ms) on one of its GPUs, its roofline time ``ms`` and what
    bounds it; ``overhead_ms``, what the pass costs beyond bytes and FLOPs (the verification
    pass also carries the speculative step's), and ``total_ms``, the two together."""

    memory_ms: float
    compute_ms: float
    communication_ms: float
    ms: float
    bound: str
    gpus: int
    overhead_ms: float = 0.0

    @property
    def total_ms(self) -> float:
        return self.ms + self.overhead_ms

    @classmethod
    def of(cls, p: Pass, gpus: int, overhead_s: float = 0.0) -> PassTimes:
        return cls(p.memory_s * 1000, p.compute_s * 1000, p.communication_s * 1000,
                   p.seconds * 1000, p.bound, gpus, overhead_s * 1000)


@dataclass(frozen=True)
class Roofline:
    """Everything the roofline section and ``GET /api/roofline`` show at batch ``B``."""

    batch: int
    t_target_ms: float  # the passes' roofline times, without overheads
    t_verify_ms: float
    t_draft_ms: float
    t_step_ms: float  # a plain decode step: the target's pass, its launch and the sampler
    launch_ms: float  # the target's pass: launching its layers' kernels
    draft_launch_ms: float  # the draft's pass: its own layers' launch and the proposer's time
    sample_ms: float  # the sampler, once a step
    step_overhead_ms: float  # the engine's fixed time, once a step
    spec_overhead_ms: float  # o_spec(B), added once a cycle
    c: float  # in plain steps t_step, overheads included
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
    o = s.overheads
    launch, draft_launch = launch_s(o, s.target.layers), draft_overhead_s(o, s.draft.layers)
    sampler, per_cycle = sample_s(o, batch), spec_step_overhead_s(o, batch)
    step = step_s(s, batch)
    c, v = costs(s, batch)
    speedup = expected_tokens(s.alpha, s.k) / (s.k * c + v)
    base = 1.0 / step
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
        t_step_ms=step * 1000,
        launch_ms=launch * 1000,
        draft_launch_ms=draft_launch * 1000,
        sample_ms=sampler * 1000,
        step_overhead_ms=o.step_fixed_s * 1000,
        spec_overhead_ms=per_cycle * 1000,
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
        target_pass=PassTimes.of(target, s.gpus, launch + sampler + o.step_fixed_s),
        verify_pass=PassTimes.of(verify, s.gpus, launch + sampler + o.step_fixed_s + per_cycle),
        draft_pass=PassTimes.of(draft, s.draft_gpus, draft_launch),
    )
