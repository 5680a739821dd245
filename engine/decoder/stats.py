"""The summary of a speculative run against a target-only run (docs/design.md, "The estimators")."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from engine.analytic import acceptance as estimators
from engine.analytic import geometric, lookup, theory, trees
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
class MeasuredCosts:
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
) -> MeasuredCosts:
    """``c`` and ``v`` from every draft step, every verification pass and every target-only
    step timed: total time over count for each, so ``k c + v`` target steps is the mean
    cycle and ``1 / step_ms`` the target-only rate the measured speedup divides by."""
    if not draft_step_ms or not verify_ms or not baseline_step_ms:
        raise ValueError("no timings to cost")
    draft, verify = statistics.fmean(draft_step_ms), statistics.fmean(verify_ms)
    step = statistics.fmean(baseline_step_ms)
    return MeasuredCosts(draft, verify, step, draft / step, verify / step)


def cycle_costs(cycles: Sequence[CycleEvent], baseline_step_ms: Sequence[float]) -> MeasuredCosts:
    """The costs of these cycles: a draft model's steps, or prompt lookup's one lookup a
    cycle; with prompt lookup v prices the cycles that verify a proposal (the others are plain
    target steps, priced as such by engine.analytic.lookup)."""
    proposing = [c for c in cycles if c.proposed > 0]
    verified = proposing if cycles and cycles[0].drafter == "ngram" and proposing else cycles
    return costs([ms for c in cycles for ms in c.draft_step_ms], [c.verify_ms for c in verified],
                 baseline_step_ms)


def proposal_lengths(cycles: Sequence[CycleEvent], k: int) -> list[int]:
    """Cycles that proposed m = 0..k tokens."""
    lengths = [0] * (k + 1)
    for c in cycles:
        lengths[c.proposed] += 1
    return lengths


def predicted_speedup(
    cycles: Sequence[CycleEvent], alpha: float | None, c: float, v: float
) -> float | None:
    """The drafter's own slider model at the cycles' alpha, c and v. Prompt lookup's prices
    the share pi of cycles with a proposal and their lengths (engine.analytic.lookup); a
    drafter that proposes k tokens every cycle at c target steps a token (a draft model, a
    draft head) has the draft model's (engine.analytic.theory); a static token tree has the
    tree model's (:func:`tree_tokens`). None without an alpha, where a drafter proposes every
    cycle, and for a tree grown anew each cycle; prompt lookup without a proposal needs
    none."""
    k = cycles[0].k
    if cycles[0].tree is not None:  # a static tree has its model; EAGLE-2's has none
        tokens = tree_tokens(cycles)
        return None if tokens is None else tokens / theory.cycle_cost(k, c, v)
    if cycles[0].drafter == "ngram":
        lengths = proposal_lengths(cycles, k)
        pi = 1.0 - lengths[0] / len(cycles)
        return lookup.speedup(alpha or 0.0, k, pi, c, v, lengths)
    return None if alpha is None else theory.speedup(alpha, k, c, v)


def tree_tokens(cycles: Sequence[CycleEvent]) -> float | None:
    """Tokens a cycle that the static tree of these cycles yields by the tree model
    (engine.analytic.trees) at the acceptance by rank and depth the cycles measured; None
    for a tree drawn anew each cycle (EAGLE-2)."""
    paths = [tuple(p) for p in cycles[0].tree.paths]
    if not paths:
        return None
    acc = trees.rank_acceptance([(c.tree.ranks, c.n_accepted) for c in cycles],
                                cycles[0].k, max(p[-1] for p in paths) + 1)
    return trees.expected_tokens(paths, acc)


def histogram_speedup(cycles: Sequence[CycleEvent], c: float, v: float) -> float | None:
    """The speedup with independence dropped: the tokens per cycle of the measured
    acceptance-length histogram over the same cycle cost as :func:`predicted_speedup`."""
    k = cycles[0].k
    without = sum(1 for cycle in cycles if cycle.proposed == 0)
    tokens = geometric.tokens_per_cycle(
        estimators.acceptance_histogram(proposals(_proposing(cycles)), k), without)
    if tokens is None:
        return None
    if cycles[0].drafter == "ngram":
        return tokens / lookup.cycle_cost(1.0 - without / len(cycles), c, v)
    return tokens / theory.cycle_cost(k, c, v)


def _proposing(cycles: Sequence[CycleEvent]) -> list[CycleEvent]:
    return [c for c in cycles if c.proposed > 0]


def summarize(cycles: Sequence[CycleEvent], baseline_step_ms: Sequence[float]) -> SummaryEvent:
    """Counted and expected alpha, the vLLM-style rates, c, v, and measured against predicted
    speedup. ``baseline_step_ms``: the target-only run's per-token step times."""
    if not cycles:
        raise ValueError("no cycles to summarise")
    if not baseline_step_ms:
        raise ValueError("no target-only steps to compare with")
    counts = acceptance(cycles)
    k = cycles[0].k
    proposing = _proposing(cycles)
    # One base for every acceptance figure: the cycles with a proposal (the per-position
    # shares divide by those that proposed at least i).
    histogram = estimators.acceptance_histogram(proposals(proposing), k)
    per_position = estimators.tally(proposals(cycles)).per_position(k)
    cost = cycle_costs(cycles, baseline_step_ms)
    baseline_tok_s = 1000.0 * len(baseline_step_ms) / sum(baseline_step_ms)
    fit = geometric.geometric_fit(proposals(cycles), counts.alpha_counted)
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
        speedup_predicted=predicted_speedup(cycles, counts.alpha_counted, cost.c, cost.v),
        baseline_tokens=len(baseline_step_ms),
        drafter=cycles[0].drafter,
        proposal_share=len(proposing) / len(cycles),
        proposed_per_cycle=counts.drafted / len(proposing) if proposing else 0.0,
        proposal_lengths=proposal_lengths(cycles, k),
        speedup_from_histogram=histogram_speedup(cycles, cost.c, cost.v),
        # infinite only for counts the model calls impossible (p is then 0): JSON has no inf
        geometric_chi2=None if fit is None or math.isinf(fit.chi2) else fit.chi2,
        geometric_df=0 if fit is None else fit.df,
        geometric_p=None if fit is None else fit.p_value,
        geometric_smallest_expected=None if fit is None else fit.smallest_expected,
        tree="" if cycles[0].tree is None else cycles[0].tree.shape,
    )
