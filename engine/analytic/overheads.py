"""What a step costs beyond its bytes and FLOPs, as pure functions (standard library only).

The roofline (:mod:`engine.analytic.roofline`) prices a forward pass by the bytes it reads and
the FLOPs it does. A real engine pays more: kernel launches, scheduling and sampling on every
pass, some of it per sequence in the batch, and, when speculation is configured, a rejection
sampler and bookkeeping on every step even where it drafts nothing (vLLM's k = 0; vllm-project/
vllm issue 49548). Three terms, each a fixed part and a part per row (sequence) of the batch:

- a forward pass: ``pass_fixed_s + pass_per_row_s B``, added to every pass, draft or target
- a speculative step: ``spec_fixed_s + spec_per_row_s B``, added once a cycle (and to a
  ``k = 0`` step of an engine that has speculation configured)

So with ``t(B, T)`` the roofline time of a pass (s), ``o_pass(B)`` and ``o_spec(B)`` the two
overheads, one plain decode step costs ``t_p(B, 1) + o_pass(B)`` and one speculative cycle
``k (t_q(B, 1) + o_pass(B)) + t_p(B, k + 1) + o_pass(B) + o_spec(B)``.

The terms are fitted by least squares (:func:`fit_linear_overhead`) on measurements whose
roofline time is known: the residual ``measured - model`` against ``[1, B]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Overheads:
    """Seconds beyond bytes and FLOPs: per forward pass and per speculative step, each a fixed
    part plus a part per row of the batch. All zero: the ideal roofline."""

    pass_fixed_s: float = 0.0
    pass_per_row_s: float = 0.0
    spec_fixed_s: float = 0.0
    spec_per_row_s: float = 0.0
    source: str = "none (the ideal roofline)"

    def __post_init__(self) -> None:
        for name in ("pass_fixed_s", "pass_per_row_s", "spec_fixed_s", "spec_per_row_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be at least 0 s, got {getattr(self, name)}")


NONE = Overheads()


def pass_overhead_s(o: Overheads, batch: float) -> float:
    """What one forward pass over ``batch`` rows costs beyond its bytes and FLOPs."""
    return o.pass_fixed_s + o.pass_per_row_s * batch


def spec_step_overhead_s(o: Overheads, batch: float) -> float:
    """What one speculative step costs beyond its passes (rejection sampler, bookkeeping; what
    vLLM pays at k = 0)."""
    return o.spec_fixed_s + o.spec_per_row_s * batch


def plain_step_s(target_s: float, o: Overheads, batch: float) -> float:
    """One decode step without speculation: the target's pass ``t_p(B, 1)`` plus its overhead."""
    return target_s + pass_overhead_s(o, batch)


def k0_step_s(target_s: float, o: Overheads, batch: float) -> float:
    """One step of an engine with speculation configured but ``k = 0``: a plain step plus the
    speculative step's overhead (not free, as vLLM issue 49548 measured)."""
    return plain_step_s(target_s, o, batch) + spec_step_overhead_s(o, batch)


def cycle_s(draft_s: float, verify_s: float, k: int, o: Overheads, batch: float) -> float:
    """One speculative cycle of a chain draft: ``k`` draft passes ``t_q(B, 1)`` and one
    verification pass ``t_p(B, k + 1)``, each with its pass overhead, plus the step's."""
    if k < 1:
        raise ValueError("a speculative cycle drafts at least one token (k >= 1)")
    per_pass = pass_overhead_s(o, batch)
    return k * (draft_s + per_pass) + verify_s + per_pass + spec_step_overhead_s(o, batch)


def speedup(expected_tokens: float, draft_s: float, verify_s: float, target_s: float, k: int,
            o: Overheads, batch: float) -> float:
    """Throughput speedup of speculation over plain decoding at batch ``B``: tokens a cycle
    over the cycle's time, in plain steps, ``E t_step / t_cycle``."""
    return expected_tokens * plain_step_s(target_s, o, batch) / cycle_s(
        draft_s, verify_s, k, o, batch)


@dataclass(frozen=True)
class LinearFit:
    """``fixed + per_row B`` fitted to residuals (s). ``per_row_identified`` is False when the
    rows all share one batch, so a fixed time and a time a row cannot be told apart: the fit
    then puts everything in the fixed part."""

    fixed_s: float
    per_row_s: float
    per_row_identified: bool
    rows: int
    rms_s: float


def fit_linear_overhead(rows: Sequence[tuple[float, float]]) -> LinearFit:
    """Least squares of ``residual = fixed + per_row B`` over ``rows`` of ``(B, residual_s)``,
    both terms held at zero or above (a negative time would be a term the data do not show:
    that term is dropped and the other refitted alone)."""
    if not rows:
        raise ValueError("fitting needs at least one measured row")
    n = len(rows)
    batches = [float(b) for b, _ in rows]
    residuals = [float(r) for _, r in rows]
    mean_b, mean_r = sum(batches) / n, sum(residuals) / n
    spread = sum((b - mean_b) ** 2 for b in batches)
    identified = spread > 0
    if identified:
        per_row = sum((b - mean_b) * (r - mean_r) for b, r in zip(batches, residuals,
                                                                  strict=True)) / spread
        fixed = mean_r - per_row * mean_b
        if per_row < 0:  # no time a row in these data: fixed only
            per_row, fixed = 0.0, mean_r
        elif fixed < 0:  # no fixed time: a line through the origin
            fixed = 0.0
            per_row = sum(b * r for b, r in zip(batches, residuals, strict=True)) / sum(
                b * b for b in batches)
    else:
        per_row, fixed = 0.0, mean_r
    fixed, per_row = max(0.0, fixed), max(0.0, per_row)
    rms = (sum((fixed + per_row * b - r) ** 2 for b, r in zip(batches, residuals, strict=True))
           / n) ** 0.5
    return LinearFit(fixed, per_row, identified, n, rms)
