"""The summary of a speculative run against a target-only run (docs/design.md, "The estimators")."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict

from engine.analytic import acceptance as estimators
from engine.analytic import theory
from engine.decoder.events import Acceptance, CycleEvent, SummaryEvent


def proposals(cycles: Sequence[CycleEvent]) -> list[tuple[int, int]]:
    """Each cycle as the estimators take it: (draft tokens proposed, accepted)."""
    return [(c.k, c.n_accepted) for c in cycles]


def acceptance(cycles: Sequence[CycleEvent]) -> Acceptance:
    """What the cycles so far tell, before any target-only run (the page shows it live);
    before any cycle, every figure is None."""
    counts = estimators.tally(proposals(cycles))
    overlaps = [o for c in cycles for o in c.overlap]
    tokens = sum(c.n_emitted for c in cycles)
    cycle_ms = sum(c.cycle_ms for c in cycles)
    return Acceptance(
        tokens=tokens,
        cycles=counts.cycles,
        accepted=counts.accepted,
        drafted=counts.proposed,
        trials=counts.trials,
        alpha_counted=counts.alpha_counted,
        alpha_expected=statistics.fmean(overlaps) if overlaps else None,
        draft_acceptance_rate=counts.draft_acceptance_rate,
        mean_acceptance_length=counts.mean_acceptance_length,
        spec_tok_s=1000.0 * tokens / cycle_ms if cycle_ms > 0 else None,
    )


def summarize(cycles: Sequence[CycleEvent], baseline_step_ms: Sequence[float]) -> SummaryEvent:
    """Counted and expected alpha, the vLLM-style rates, c, v, and measured against predicted
    speedup. ``baseline_step_ms``: the target-only run's per-token step times."""
    if not cycles:
        raise ValueError("no cycles to summarise")
    if not baseline_step_ms:
        raise ValueError("no target-only steps to compare with")
    counts = acceptance(cycles)
    k = cycles[0].k
    histogram = estimators.acceptance_histogram(proposals(cycles), k)
    per_position = estimators.tally(proposals(cycles)).per_position(k)

    step_ms = statistics.median(baseline_step_ms)
    draft_step_ms = statistics.median(ms for c in cycles for ms in c.draft_step_ms)
    verify_ms = statistics.median(c.verify_ms for c in cycles)
    c_cost, v_cost = draft_step_ms / step_ms, verify_ms / step_ms
    baseline_tok_s = 1000.0 * len(baseline_step_ms) / sum(baseline_step_ms)
    return SummaryEvent(
        k=k,
        **asdict(counts),
        per_position_acceptance=per_position,
        acceptance_length_histogram=histogram,
        draft_step_ms=draft_step_ms,
        verify_ms=verify_ms,
        step_ms=step_ms,
        c=c_cost,
        v=v_cost,
        baseline_tok_s=baseline_tok_s,
        speedup_measured=(None if counts.spec_tok_s is None
                          else counts.spec_tok_s / baseline_tok_s),
        speedup_predicted=(None if counts.alpha_counted is None
                           else theory.speedup(counts.alpha_counted, k, c_cost, v_cost)),
        baseline_tokens=len(baseline_step_ms),
    )
