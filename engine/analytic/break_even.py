"""Speculation at batch ``B`` on the roofline: ``c(B)``, ``v(B)``, the speedup ``S(B)``, the
best k, and the break-even batch, found segment by segment between the knees of a
piecewise-linear deficit rather than batch by batch. All ``B`` sequences draft and verify in
lockstep, so ``S(B) = E[tokens per cycle] / (k c(B) + v(B))``.

Every time includes the setting's overheads (:mod:`engine.analytic.overheads`), each charged
to whoever pays it: a plain step is ``t_step(B) = t_p(B,1) + l(p) + s B`` (the target's
launch, the sampler, the engine's fixed time f), and in those steps ``c(B) = (t_q(B,1) + l(q)
+ d) / t_step(B)`` (the draft pays its own launch and the proposer's fixed time d) and
``v(B) = (t_p(B,k+1) + l(p) + s B + f + o_spec(B)) / t_step(B)``, so
``k c + v`` is :func:`engine.analytic.overheads.cycle_s` over the plain step. With no overheads
these are ``t_q / t_p`` and ``t_p(B,k+1) / t_p(B,1)``. Standard library only."""

from __future__ import annotations

import math

from engine.analytic import lookup
from engine.analytic.overheads import (
    draft_overhead_s,
    launch_s,
    plain_step_s,
    sample_s,
    spec_step_overhead_s,
)
from engine.analytic.passes import Setting, draft_pass, forward_pass, target_pass
from engine.analytic.theory import CURVE_MAX_K, expected_tokens

BATCH_MAX = 1024


def step_s(s: Setting, batch: float) -> float:
    """A plain decode step at batch ``B`` (s): the target's pass, its launch, the sampler."""
    return plain_step_s(target_pass(s, batch).seconds, s.overheads, batch, s.target.layers)


def draft_step_s(s: Setting, batch: float) -> float:
    """One draft pass at batch ``B`` with the draft's own launch and the proposer's fixed
    time (s)."""
    return draft_pass(s, batch).seconds + draft_overhead_s(s.overheads, s.draft.layers)


def verify_step_s(s: Setting, batch: float, k: int, spec: bool = True) -> float:
    """The verification pass over ``k + 1`` positions with the target's launch, the sampler,
    the step's fixed time and (``spec``) the speculative cycle's own overhead (s)."""
    o = s.overheads
    return (target_pass(s, batch, k + 1).seconds + launch_s(o, s.target.layers)
            + sample_s(o, batch) + o.step_fixed_s
            + (spec_step_overhead_s(o, batch) if spec else 0.0))


def costs(s: Setting, batch: float, k: int | None = None) -> tuple[float, float]:
    """``c(B)`` and ``v(B)``: the draft step and the verification step (with what each pays
    beyond bytes and FLOPs), in plain decode steps at batch ``B``."""
    k = s.k if k is None else k
    step = step_s(s, batch)
    return draft_step_s(s, batch) / step, verify_step_s(s, batch, k) / step


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
    """Prompt lookup's ``S(B)``: no draft pass (the lookup runs on the host, taken as free),
    a verification pass over ``k + 1`` positions in a share ``pi`` of cycles, a plain target
    step in the others (:func:`engine.analytic.lookup.speedup` with ``v = v(B)``). The
    speculative step's overhead is paid every cycle, proposal or not, so it is lookup's
    ``c``; without overheads ``c = 0``."""
    k = s.k if k is None else k
    step = step_s(s, batch)
    v = verify_step_s(s, batch, k, spec=False) / step
    c = spec_step_overhead_s(s.overheads, batch) / step
    return lookup.speedup(s.alpha, k, pi, c, v)


def _deficit_pieces(s: Setting, draft: bool = True) -> tuple[list[float], object]:
    """``f(B) = k (t_q(B,1) + l(q)) + t_p(B,k+1) + l(p) + s B + o_spec - E t_step(B)`` (the
    cycle less ``E`` plain steps), with ``S(B) <= 1`` exactly when ``f(B) >= 0``, and
    the batches where f changes slope. Every time is the larger of two lines in B plus a
    third line (communication), and the overheads are lines in B, so f is linear between
    those batches. ``draft=False``: prompt lookup with a proposal every cycle, without the
    draft term (``S(B) <= 1`` exactly when ``v(B) + c(B) >= E``)."""
    tokens = expected_tokens(s.alpha, s.k)
    drafts = s.k if draft else 0

    def f(batch: float) -> float:
        return (drafts * draft_step_s(s, batch) + verify_step_s(s, batch, s.k)
                - tokens * step_s(s, batch))

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
    """:func:`break_even_batch` for prompt lookup with a proposal every cycle (``pi = 1``):
    the smallest batch with ``v(B) + c(B) >= E(T)``. It has no draft passes to pay for, so
    it is never below the draft model's. Without a speculative step's overhead it is the
    same for every share ``pi > 0`` of cycles with a proposal; with one (paid every cycle), a
    smaller share breaks even sooner."""
    return _first_losing_batch(s, batch_max, draft=False)


def _first_losing_batch(s: Setting, batch_max: int, draft: bool) -> int | None:
    def loses(batch: int) -> bool:
        return (speedup_at(s, batch) if draft else lookup_speedup_at(s, batch, 1.0)) <= 1.0

    if s.target.experts or s.draft.experts:
        # a mixture of experts reads 1 - (1 - k/n)^(B T) of its experts: not linear in B,
        # so no knees bound the crossings; every batch is tried
        return next((b for b in range(1, batch_max + 1) if loses(b)), None)
    knees, f = _deficit_pieces(s, draft)

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
