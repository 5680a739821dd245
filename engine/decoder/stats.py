"""The summary of a speculative run against a target-only run (docs/design.md, "The estimators")."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict

from engine.analytic import lookup, theory
from engine.decoder.events import Acceptance, CycleEvent, SummaryEvent


def acceptance(cycles: Sequence[CycleEvent]) -> Acceptance:
    """What the cycles so far tell, before any target-only run (the page shows it live)."""
    if not cycles:
        raise ValueError("no cycles to summarise")
    accepted = sum(c.n_accepted for c in cycles)
    drafted = sum(c.proposed for c in cycles)
    # A cycle's trials: its accepted drafts, plus the rejected one if it had one (counted
    # over proposed tokens: a prompt-lookup cycle without a proposal has none).
    trials = sum(c.n_accepted + c.rejected for c in cycles)
    overlaps = [o for c in cycles for o in c.overlap]
    tokens = sum(c.n_emitted for c in cycles)
    # vLLM counts a draft only where something was proposed: the same here.
    proposing = sum(c.proposed > 0 for c in cycles)
    return Acceptance(
        tokens=tokens,
        cycles=len(cycles),
        accepted=accepted,
        drafted=drafted,
        trials=trials,
        alpha_counted=accepted / trials if trials else 0.0,
        alpha_expected=statistics.fmean(overlaps) if overlaps else 0.0,
        draft_acceptance_rate=accepted / drafted if drafted else 0.0,
        mean_acceptance_length=1.0 + accepted / proposing if proposing else 1.0,
        spec_tok_s=1000.0 * tokens / sum(c.cycle_ms for c in cycles),
    )


def per_position_acceptance(histogram: Sequence[int]) -> list[float]:
    """The share of cycles that accepted draft position i = 1..k, from ``histogram[a]``, the
    cycles that accepted exactly a = 0..k drafts: position i is accepted in every cycle that
    accepted at least i drafts."""
    cycles = sum(histogram)
    return [sum(histogram[i:]) / cycles if cycles else 0.0 for i in range(1, len(histogram))]


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

    step_ms = statistics.median(baseline_step_ms)
    # A draft model's steps, or prompt lookup's one lookup per cycle.
    draft_step_ms = statistics.median(ms for c in cycles for ms in c.draft_step_ms)
    drafter = cycles[0].drafter
    proposing = [c for c in cycles if c.proposed > 0]
    # Prompt lookup: v prices the cycles that verify a proposal (the others are target steps).
    verified = proposing if drafter == "ngram" and proposing else cycles
    verify_ms = statistics.median(c.verify_ms for c in verified)
    c_cost, v_cost = draft_step_ms / step_ms, verify_ms / step_ms
    baseline_tok_s = 1000.0 * len(baseline_step_ms) / sum(baseline_step_ms)
    pi = len(proposing) / len(cycles)
    if drafter == "ngram":
        lengths = [0] * (k + 1)
        for c in proposing:
            lengths[c.proposed] += 1
        predicted = lookup.speedup(counts.alpha_counted, k, pi, c_cost, v_cost, lengths)
    else:
        predicted = theory.speedup(counts.alpha_counted, k, c_cost, v_cost)
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
        speedup_measured=counts.spec_tok_s / baseline_tok_s,
        speedup_predicted=predicted,
        baseline_tokens=len(baseline_step_ms),
        drafter=drafter,
        proposal_share=pi,
        proposed_per_cycle=counts.drafted / len(proposing) if proposing else 0.0,
    )
