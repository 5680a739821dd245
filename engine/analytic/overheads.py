"""What a step costs beyond its bytes and FLOPs, as pure functions (standard library only).

The roofline (:mod:`engine.analytic.roofline`) prices a forward pass by the bytes it reads, the
FLOPs it does and its all-reduces (two a layer at tensor parallel > 1, each with its latency:
a draft pays them for its own layers). A real engine pays more, and each term here has a
cause and is charged to whoever pays it:

- ``launch_s_per_layer``: launching and scheduling a layer's kernels, paid by every forward
  pass once for each layer of the model that runs it (an 80-layer target 80 times, a 16-layer
  draft 16 times, a one-layer EAGLE head once). It depends on the engine (CUDA graphs or
  ``torch.compile`` as gpt-fast and vLLM's full graphs, piecewise graphs, eager), not on the
  batch.
- ``allreduce_s_per_log2``: an all-reduce's latency beyond the link's own, for each doubling
  of the tensor-parallel GPUs (the depth of NCCL's tree): paid twice a layer by every pass at
  tensor parallel > 1, so a draft pays it for its own layers at its own degree.
- ``sample_s_per_row``: the sampler (and, when speculating, the rejection sampler) once a
  step for each row of the batch; a draft's argmax is part of its pass.
- ``step_fixed_s``: the engine's own time a step beyond its passes (scheduling the batch,
  preparing inputs, the sampler's fixed part), paid once by every step, plain or speculative.
- ``draft_fixed_s``: the same for each draft pass (a proposer's bookkeeping between passes:
  vLLM's EAGLE proposer prepares each position's inputs on the host).
- ``spec_fixed_s + spec_per_row_s B``: a speculative cycle's own bookkeeping (the rejection
  sampler's setup, the accepted tokens' bookkeeping), paid once a cycle at a fixed k.
- ``schedule_fixed_s + schedule_per_row_s B``: what a per-batch schedule adds to each step on
  vLLM's V1 model runner (piecewise CUDA graphs; vLLM issue 49548 measured it at k = 0): paid
  only where a schedule is deployed, never by a fixed k.

So with ``t(B, T)`` the roofline time of a pass (s) and ``l(m)`` the launch time of model
``m``'s pass, one plain decode step costs ``t_p(B, 1) + l(p) + s B + f`` and one speculative
cycle ``k (t_q(B, 1) + l(q) + d) + t_p(B, k + 1) + l(p) + s B + f + o_spec(B)``, with ``f``
the step's fixed time and ``d`` a draft pass's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Overheads:
    """Seconds beyond bytes and FLOPs, each with its cause (see the module). All zero: the
    ideal roofline."""

    launch_s_per_layer: float = 0.0
    sample_s_per_row: float = 0.0
    spec_fixed_s: float = 0.0
    spec_per_row_s: float = 0.0
    source: str = "none (the ideal roofline)"
    allreduce_s_per_log2: float = 0.0
    step_fixed_s: float = 0.0
    draft_fixed_s: float = 0.0
    schedule_fixed_s: float = 0.0
    schedule_per_row_s: float = 0.0
    # The share of bf16's achieved bandwidth a weight-only kernel reaches while it dequantises
    # (1: as fast as bf16 per byte; engine.analytic.validate.fit_kernel_shares)
    int8_share: float = 1.0
    int4_share: float = 1.0

    def __post_init__(self) -> None:
        for name in TERMS:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be at least 0 s, got {getattr(self, name)}")
        for name in ("int8_share", "int4_share"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} is a share of bf16's bandwidth, above 0 and at "
                                 f"most 1, got {getattr(self, name)}")

    def kernel_share(self, dtype: str) -> float:
        """The share of the achieved bandwidth the weights of ``dtype`` are read at."""
        return {"int8": self.int8_share, "int4": self.int4_share}.get(dtype, 1.0)


TERMS = ("launch_s_per_layer", "allreduce_s_per_log2", "sample_s_per_row", "step_fixed_s",
         "draft_fixed_s", "spec_fixed_s", "spec_per_row_s", "schedule_fixed_s",
         "schedule_per_row_s")
"""Every time term of :class:`Overheads`, in the order the page lists them."""
NONE = Overheads()


def launch_s(o: Overheads, layers: int) -> float:
    """What one forward pass of a model with ``layers`` layers pays to launch its kernels."""
    return o.launch_s_per_layer * layers


def sample_s(o: Overheads, batch: float) -> float:
    """The sampler's time in one step of ``batch`` rows (once a step, plain or speculative)."""
    return o.sample_s_per_row * batch


def spec_step_overhead_s(o: Overheads, batch: float) -> float:
    """What one speculative cycle at a fixed k costs beyond its passes, the step's fixed time
    and the sampler (its own bookkeeping)."""
    return o.spec_fixed_s + o.spec_per_row_s * batch


def schedule_overhead_s(o: Overheads, batch: float) -> float:
    """What a per-batch schedule adds to a step on vLLM's V1 model runner (issue 49548)."""
    return o.schedule_fixed_s + o.schedule_per_row_s * batch


def draft_overhead_s(o: Overheads, layers: int) -> float:
    """What one draft pass of a ``layers``-layer drafter pays beyond its bytes and FLOPs: its
    launch and the proposer's fixed time."""
    return launch_s(o, layers) + o.draft_fixed_s


def plain_step_s(target_s: float, o: Overheads, batch: float, layers: int) -> float:
    """One decode step without speculation: the target's pass ``t_p(B, 1)``, its launch
    (``layers``: the target's), the sampler and the engine's fixed time a step."""
    return target_s + launch_s(o, layers) + sample_s(o, batch) + o.step_fixed_s


def k0_step_s(target_s: float, o: Overheads, batch: float, layers: int) -> float:
    """One step of a ``k = 0`` range of a per-batch schedule: a plain step plus what the
    schedule adds (not free, as vLLM issue 49548 measured)."""
    return plain_step_s(target_s, o, batch, layers) + schedule_overhead_s(o, batch)


def cycle_s(draft_s: float, verify_s: float, k: int, o: Overheads, batch: float,
            draft_layers: int, target_layers: int) -> float:
    """One speculative cycle of a chain draft: ``k`` draft passes ``t_q(B, 1)`` (each with
    its launch and the proposer's fixed time) and one verification pass ``t_p(B, k + 1)``
    with the target's launch, the sampler, the step's fixed time and the cycle's own."""
    if k < 1:
        raise ValueError("a speculative cycle drafts at least one token (k >= 1)")
    return (k * (draft_s + draft_overhead_s(o, draft_layers)) + verify_s
            + launch_s(o, target_layers) + sample_s(o, batch) + o.step_fixed_s
            + spec_step_overhead_s(o, batch))


def speedup(expected_tokens: float, draft_s: float, verify_s: float, target_s: float, k: int,
            o: Overheads, batch: float, draft_layers: int, target_layers: int) -> float:
    """Throughput speedup of speculation over plain decoding at batch ``B``: tokens a cycle
    over the cycle's time, in plain steps, ``E t_step / t_cycle``."""
    return expected_tokens * plain_step_s(target_s, o, batch, target_layers) / cycle_s(
        draft_s, verify_s, k, o, batch, draft_layers, target_layers)


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


@dataclass(frozen=True)
class LaunchFit:
    """The launch time a layer and the all-reduce latency a doubling of the GPUs, fitted
    together through the origin to plain steps' residuals (s)."""

    launch_s_per_layer: float
    allreduce_s_per_log2: float
    rows: int
    rms: float  # in the rows' unit (validate's rows: a share of the measured step)


def fit_launch(rows: Sequence[tuple[float, float, float]]) -> LaunchFit:
    """Least squares of ``residual = launch x layers + latency x all-reduces x log2 G`` over
    ``rows`` of ``(layers, all-reduces x log2 G, residual_s)``, each term held at 0 or above
    (a negative one is dropped and the other refitted alone: a pass faster than its bytes
    and FLOPs shows no such time, and the rate it ran at is then the term to question)."""
    if not rows:
        raise ValueError("fitting needs at least one measured row")

    def alone(column: int) -> float:
        den = sum(r[column] ** 2 for r in rows)
        return max(0.0, sum(r[column] * r[2] for r in rows) / den) if den else 0.0

    sxx = sum(x * x for x, _, _ in rows)
    syy = sum(y * y for _, y, _ in rows)
    sxy = sum(x * y for x, y, _ in rows)
    det = sxx * syy - sxy * sxy
    launch = latency = -1.0
    if det > 1e-12 * max(sxx * syy, 1e-300):
        sxr = sum(x * r for x, _, r in rows)
        syr = sum(y * r for _, y, r in rows)
        launch, latency = (syy * sxr - sxy * syr) / det, (sxx * syr - sxy * sxr) / det
    if launch < 0 or latency < 0:  # one term alone: whichever explains more
        candidates = [(alone(0), 0.0), (0.0, alone(1))]
        launch, latency = min(candidates, key=lambda c: sum(
            (c[0] * x + c[1] * y - r) ** 2 for x, y, r in rows))
    rms = (sum((launch * x + latency * y - r) ** 2 for x, y, r in rows) / len(rows)) ** 0.5
    return LaunchFit(launch, latency, len(rows), rms)
