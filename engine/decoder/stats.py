"""The summary of a speculative run against a target-only run (docs/design.md, "The estimators")."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from engine.analytic import acceptance as estimators
from engine.analytic import lookup, theory
from engine.decoder.events import Acceptance, CycleEvent, SummaryEvent


def proposals(cycles: Sequence[CycleEvent]) -> list[tuple[int, int]]:
    """Each cycle as the estimators take it: (draft tokens proposed, accepted); a prompt-lookup
    cycle proposes 0..k."""
    return [(c.proposed, c.n_accepted) for c in cycles]


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
    """The costs of these cycles: a draft model's steps, or prompt lookup's one lookup a
    cycle; with prompt lookup v prices the cycles that verify a proposal (the others are plain
    target steps, priced as such by engine.analytic.lookup)."""
    proposing = [c for c in cycles if c.proposed > 0]
    verified = proposing if cycles and cycles[0].drafter == "ngram" and proposing else cycles
    return costs([ms for c in cycles for ms in c.draft_step_ms], [c.verify_ms for c in verified],
                 baseline_step_ms)


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

    drafter = cycles[0].drafter
    proposing = [c for c in cycles if c.proposed > 0]
    cost = cycle_costs(cycles, baseline_step_ms)
    c_cost, v_cost = cost.c, cost.v
    baseline_tok_s = 1000.0 * len(baseline_step_ms) / sum(baseline_step_ms)
    pi = len(proposing) / len(cycles)
    if drafter == "ngram":
        lengths = [0] * (k + 1)
        for c in proposing:
            lengths[c.proposed] += 1
        # alpha is None only when nothing was proposed (pi = 0), where it does not enter
        predicted = lookup.speedup(counts.alpha_counted or 0.0, k, pi, c_cost, v_cost, lengths)
    elif counts.alpha_counted is None:
        predicted = None
    else:
        predicted = theory.speedup(counts.alpha_counted, k, c_cost, v_cost)
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
        speedup_measured=(None if counts.spec_tok_s is None
                          else counts.spec_tok_s / baseline_tok_s),
        speedup_predicted=predicted,
        baseline_tokens=len(baseline_step_ms),
        drafter=drafter,
        proposal_share=pi,
        proposed_per_cycle=counts.drafted / len(proposing) if proposing else 0.0,
    )
