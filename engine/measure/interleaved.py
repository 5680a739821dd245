"""The measured speedup, taken so that it holds still from one run to the next.

A target-only baseline run after the speculative one sees a different machine (other
processes, frequency, caches), so the two rates drift apart by chance: identical runs measured
0.8x to 1.4x. Here the baseline is interleaved with the speculative run instead: after each
cycle the target alone decodes as many tokens as the cycle added, so each cycle is paired with
the target-only time for the same number of tokens, taken at the same moment. The speedup is
then the total of one over the total of the other, and its uncertainty comes from resampling
those pairs (a bootstrap); repeats of the whole run add pairs and show how much it moves.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from engine.decoder.baseline import target_only
from engine.decoder.drafter_spec import DRAFT_MODEL, DrafterSpec
from engine.decoder.events import CycleEvent, GenerationConfig, StepEvent, SummaryEvent
from engine.decoder.loading import ModelPair
from engine.decoder.speculative import speculate
from engine.decoder.stats import cycle_costs, histogram_speedup, predicted_speedup, summarize

BOOTSTRAP_SAMPLES = 400


def interleaved(
    pair: ModelPair, config: GenerationConfig, drafter: DrafterSpec = DRAFT_MODEL,
) -> Iterator[CycleEvent | StepEvent]:
    """A speculative run and a target-only run of the same prompt and settings, advanced in
    turn: each :class:`CycleEvent`, then as many target-only :class:`StepEvent`\\ s as the
    cycle added to the output. The baseline goes past an end of sequence, so it always has
    as many tokens to give: equal samples. Bad settings raise ``ValueError`` before anything
    runs; closing the iterator closes both runs."""
    speculative = speculate(pair, config, drafter=drafter)
    baseline = target_only(dataclasses.replace(pair, stop_token_ids=frozenset()), config)
    try:
        for event in speculative:
            if not isinstance(event, CycleEvent):
                continue
            yield event
            for _ in range(event.n_emitted):
                yield next(baseline)
    finally:
        speculative.close()
        baseline.close()


@dataclass(frozen=True)
class PairedCycle:
    """One cycle and the target-only time for the same number of tokens, taken after it."""

    cycle_ms: float
    draft_ms: float
    verify_ms: float
    tokens: int
    baseline_ms: float


def pair_up(events: Sequence[CycleEvent | StepEvent]) -> list[PairedCycle]:
    """The events of :func:`interleaved`, each cycle with the steps that followed it."""
    paired: list[PairedCycle] = []
    cycle: CycleEvent | None = None
    steps: list[float] = []
    for event in [*events, None]:
        if isinstance(event, StepEvent):
            steps.append(event.step_ms)
            continue
        if cycle is not None and len(steps) == cycle.n_emitted:
            paired.append(PairedCycle(cycle.cycle_ms, cycle.draft_ms, cycle.verify_ms,
                                      cycle.n_emitted, sum(steps)))
        cycle, steps = event, []
    return paired


@dataclass(frozen=True)
class MeasuredSpeedup:
    """Speculative against target-only decoding, with how sure the figure is.

    ``wall``: target-only time over speculative time for the same tokens, all repeats
    together; ``low``, ``high``: its 95% bootstrap interval; ``median_costs``: tokens per
    cycle x median target step / median cycle, which one slow step cannot move;
    ``per_repeat``: ``wall`` of each repeat on its own.
    """

    wall: float
    low: float
    high: float
    median_costs: float
    per_repeat: list[float]


def measure_speedup(
    repeats: Sequence[Sequence[PairedCycle]], step_ms: Sequence[float], seed: int = 0
) -> MeasuredSpeedup:
    """``repeats``: the paired cycles of each repeat; ``step_ms``: every target-only step."""
    pooled = [p for repeat in repeats for p in repeat]
    if not pooled or not step_ms:
        raise ValueError("no cycles to measure")

    def ratio(pairs: Sequence[PairedCycle]) -> float:
        return sum(p.baseline_ms for p in pairs) / sum(p.cycle_ms for p in pairs)

    rng = random.Random(seed)
    resampled = sorted(ratio(rng.choices(pooled, k=len(pooled)))
                       for _ in range(BOOTSTRAP_SAMPLES))
    tokens_per_cycle = sum(p.tokens for p in pooled) / len(pooled)
    return MeasuredSpeedup(
        wall=ratio(pooled),
        low=resampled[int(0.025 * BOOTSTRAP_SAMPLES)],
        high=resampled[int(0.975 * BOOTSTRAP_SAMPLES) - 1],
        median_costs=tokens_per_cycle * statistics.median(step_ms)
        / statistics.median(p.cycle_ms for p in pooled),
        per_repeat=[ratio(repeat) for repeat in repeats if repeat],
    )


def measured_summary(
    cycles: Sequence[CycleEvent],
    baseline_step_ms: Sequence[float],
    repeats: Sequence[Sequence[CycleEvent | StepEvent]],
    seed: int = 0,
    streamed: Sequence[PairedCycle] = (),
) -> SummaryEvent:
    """The summary of one pass (its ``cycles`` and target-only steps: the counts, α and the
    histogram), with everything timed taken over the counted ``repeats`` (each the events of
    one :func:`interleaved` run): the speedup, its interval, the two rates, and ``c`` and ``v``,
    so the prediction and the measurement come from the same cycles. ``streamed``: the paired
    cycles of a pass that was shown while it ran, reported on its own, not counted."""
    paired = [pair_up(events) for events in repeats]
    steps = [e.step_ms for events in repeats for e in events if isinstance(e, StepEvent)]
    timed = [e for events in repeats for e in events if isinstance(e, CycleEvent)]
    speedup = measure_speedup(paired, steps, seed)
    pooled = [p for repeat in paired for p in repeat]
    tokens = sum(p.tokens for p in pooled)
    base = summarize(cycles, baseline_step_ms)
    cost = cycle_costs(timed, steps)
    return dataclasses.replace(
        base,
        draft_step_ms=cost.draft_step_ms,
        verify_ms=cost.verify_ms,
        step_ms=cost.step_ms,
        c=cost.c,
        v=cost.v,
        # the drafter's own model, at the pass's alpha (and pi) and the quiet passes' costs
        speedup_predicted=predicted_speedup(cycles, base.alpha_counted, cost.c, cost.v),
        speedup_from_histogram=histogram_speedup(cycles, cost.c, cost.v),
        spec_tok_s=1000.0 * tokens / sum(p.cycle_ms for p in pooled),
        baseline_tok_s=1000.0 * tokens / sum(p.baseline_ms for p in pooled),
        speedup_measured=speedup.wall,
        speedup_low=speedup.low,
        speedup_high=speedup.high,
        speedup_median_costs=speedup.median_costs,
        speedup_per_repeat=speedup.per_repeat,
        speedup_streamed=(sum(p.baseline_ms for p in streamed) / sum(p.cycle_ms for p in streamed)
                          if streamed else 0.0),
    )
