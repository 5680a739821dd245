"""The summary of a speculative run against a target-only run (docs/design.md, "The estimators")."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from engine.analytic import theory
from engine.decoder.events import Acceptance, CycleEvent, SummaryEvent


def acceptance(cycles: Sequence[CycleEvent]) -> Acceptance:
    """What the cycles so far tell, before any target-only run (the page shows it live)."""
    if not cycles:
        raise ValueError("no cycles to summarise")
    accepted = sum(c.n_accepted for c in cycles)
    drafted = sum(c.k for c in cycles)
    # A cycle's trials: its accepted drafts, plus the rejected one if it had one.
    trials = sum(c.n_accepted + c.rejected for c in cycles)
    overlaps = [o for c in cycles for o in c.overlap]
    tokens = sum(c.n_emitted for c in cycles)
    return Acceptance(
        tokens=tokens,
        cycles=len(cycles),
        accepted=accepted,
        drafted=drafted,
        trials=trials,
        alpha_counted=accepted / trials if trials else 0.0,
        alpha_expected=statistics.fmean(overlaps),
        draft_acceptance_rate=accepted / drafted,
        mean_acceptance_length=1.0 + accepted / len(cycles),
        spec_tok_s=1000.0 * tokens / sum(c.cycle_ms for c in cycles),
    )


def per_position_acceptance(histogram: Sequence[int]) -> list[float]:
    """The share of cycles that accepted draft position i = 1..k, from ``histogram[a]``, the
    cycles that accepted exactly a = 0..k drafts: position i is accepted in every cycle that
    accepted at least i drafts."""
    cycles = sum(histogram)
    return [sum(histogram[i:]) / cycles if cycles else 0.0 for i in range(1, len(histogram))]


@dataclass(frozen=True)
class Costs:
    """What a cycle's parts cost, in ms and in target decode steps (docs/design.md, "The
    estimators"). Means, not medians: the measured speedup is a ratio of total times, so the
    costs the theory is given are totals too (a draft step's mean counts the first step of
    each cycle, which costs more than the others; a median leaves that out)."""

    draft_step_ms: float  # mean draft step, every step of every cycle
    verify_ms: float  # mean verification pass
    step_ms: float  # mean target-only decode step
    c: float  # draft_step_ms / step_ms
    v: float  # verify_ms / step_ms


def costs(
    draft_step_ms: Sequence[float], verify_ms: Sequence[float], baseline_step_ms: Sequence[float]
) -> Costs:
    """``c`` and ``v`` from every draft step, every verification pass and every target-only
    step timed: total time over count for each, so ``k c + v`` target steps is the mean
    cycle and ``1 / step_ms`` the target-only rate the measured speedup divides by."""
    if not draft_step_ms or not verify_ms or not baseline_step_ms:
        raise ValueError("no timings to cost")
    draft, verify = statistics.fmean(draft_step_ms), statistics.fmean(verify_ms)
    step = statistics.fmean(baseline_step_ms)
    return Costs(draft, verify, step, draft / step, verify / step)


def cycle_costs(cycles: Sequence[CycleEvent], baseline_step_ms: Sequence[float]) -> Costs:
    return costs([ms for c in cycles for ms in c.draft_step_ms], [c.verify_ms for c in cycles],
                 baseline_step_ms)


def summarize(cycles: Sequence[CycleEvent], baseline_step_ms: Sequence[float]) -> SummaryEvent:
    """Counted and expected alpha, the vLLM-style rates, c, v, and measured against predicted
    speedup. ``baseline_step_ms``: the target-only run's per-token step times."""
    counts = acceptance(cycles)
    if not baseline_step_ms:
        raise ValueError("no target-only steps to compare with")
    k = cycles[0].k
    histogram = [0] * (k + 1)
    for c in cycles:
        histogram[c.n_accepted] += 1
    per_position = per_position_acceptance(histogram)

    cost = cycle_costs(cycles, baseline_step_ms)
    baseline_tok_s = 1000.0 * len(baseline_step_ms) / sum(baseline_step_ms)
    return SummaryEvent(
        k=k,
        **asdict(counts),
        per_position_acceptance=per_position,
        acceptance_length_histogram=histogram,
        draft_step_ms=cost.draft_step_ms,
        verify_ms=cost.verify_ms,
        step_ms=cost.step_ms,
        c=cost.c,
        v=cost.v,
        baseline_tok_s=baseline_tok_s,
        speedup_measured=counts.spec_tok_s / baseline_tok_s,
        speedup_predicted=theory.speedup(counts.alpha_counted, k, cost.c, cost.v),
        baseline_tokens=len(baseline_step_ms),
    )
