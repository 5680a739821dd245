"""The interleaved measurement: the same tokens both ways, each cycle paired with the
target-only time for its tokens, and a speedup with an interval that contains it."""

from __future__ import annotations

import dataclasses

import pytest

from engine.analytic import lookup, theory
from engine.decoder.baseline import run_target_only
from engine.decoder.events import CycleEvent, GenerationConfig, StepEvent, Token
from engine.decoder.stats import cycle_costs
from engine.measure.interleaved import (
    PairedCycle,
    interleaved,
    measure_speedup,
    measured_summary,
    pair_up,
)

CONFIG = GenerationConfig(prompt="the quick brown fox", k=3, temperature=1.0,
                          max_new_tokens=30, seed=4)


def test_after_each_cycle_the_target_alone_decodes_as_many_tokens(good_pair):
    events = list(interleaved(good_pair, CONFIG))
    assert isinstance(events[0], CycleEvent)
    i = 0
    while i < len(events):
        cycle = events[i]
        steps = events[i + 1 : i + 1 + cycle.n_emitted]
        assert all(isinstance(s, StepEvent) for s in steps) and len(steps) == cycle.n_emitted
        i += 1 + cycle.n_emitted
    cycles = [e for e in events if isinstance(e, CycleEvent)]
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert len(steps) == sum(c.n_emitted for c in cycles)
    # The baseline is the target's own run, untouched by being interleaved.
    alone, _ = run_target_only(dataclasses.replace(good_pair, stop_token_ids=frozenset()),
                               dataclasses.replace(CONFIG, max_new_tokens=len(steps)))
    assert [s.token.id for s in steps] == [s.token.id for s in alone]


def test_closing_the_run_closes_both_generations(good_pair):
    events = interleaved(good_pair, CONFIG)
    assert isinstance(next(events), CycleEvent)
    assert isinstance(next(events), StepEvent)  # the target-only run has started too
    runs = [events.gi_frame.f_locals[name] for name in ("speculative", "baseline")]
    assert all(run.gi_frame is not None for run in runs)  # both suspended, mid-run
    events.close()
    assert [run.gi_frame for run in runs] == [None, None]  # both closed, caches released


def test_bad_settings_are_refused_before_anything_runs(good_pair):
    with pytest.raises(ValueError, match="k"):
        next(interleaved(good_pair, dataclasses.replace(CONFIG, k=0)))


def cycle_event(index: int, cycle_ms: float, emitted: int) -> CycleEvent:
    return CycleEvent(index=index, tokens=[Token(1, "a", "target")], draft_ms=cycle_ms / 2,
                      verify_ms=cycle_ms / 2, cycle_ms=cycle_ms, k=1, n_accepted=emitted - 1,
                      rejected=emitted == 1, draft_step_ms=[1.0], overlap=[0.5],
                      n_emitted=emitted)


def step(ms: float) -> StepEvent:
    return StepEvent(0, Token(1, "a", "target"), ms)


def test_pairs_hold_the_steps_after_each_cycle_and_drop_an_unfinished_one():
    events = [cycle_event(0, 10, 2), step(4), step(6), cycle_event(1, 8, 1), step(5),
              cycle_event(2, 9, 2), step(1)]  # the last cycle was cut short
    assert pair_up(events) == [PairedCycle(10, 5, 5, 2, 10), PairedCycle(8, 4, 4, 1, 5)]


def test_speedup_is_target_alone_over_speculative_time_with_an_interval_around_it():
    repeats = [[PairedCycle(10, 4, 6, 3, 15 + i % 3) for i in range(20)],
               [PairedCycle(12, 5, 7, 3, 15 + i % 3) for i in range(20)]]
    measured = measure_speedup(repeats, [5.0, 5.0, 6.0, 5.0], seed=1)
    pooled = [p for r in repeats for p in r]
    assert measured.wall == pytest.approx(
        sum(p.baseline_ms for p in pooled) / sum(p.cycle_ms for p in pooled))
    assert measured.low < measured.wall < measured.high
    assert measured.per_repeat == pytest.approx([
        sum(p.baseline_ms for p in r) / sum(p.cycle_ms for p in r) for r in repeats])
    assert measured.per_repeat[0] > measured.per_repeat[1]  # the slower repeat is lower
    # 3 tokens per cycle x median step 5 ms / median cycle 11 ms
    assert measured.median_costs == pytest.approx(3 * 5 / 11)
    assert measure_speedup(repeats, [5.0], seed=1) == measure_speedup(repeats, [5.0], seed=1)


def test_the_summary_states_the_measured_speedup_and_matching_rates(good_pair):
    passes = [list(interleaved(good_pair, CONFIG)) for _ in range(3)]
    streamed, repeats = passes[0], passes[1:]
    cycles = [e for e in streamed if isinstance(e, CycleEvent)]
    first_steps = [e.step_ms for e in streamed if isinstance(e, StepEvent)]
    summary = measured_summary(cycles, first_steps, repeats, seed=0,
                               streamed=pair_up(streamed))
    assert summary.speedup_low <= summary.speedup_measured <= summary.speedup_high
    assert len(summary.speedup_per_repeat) == 2
    assert summary.speedup_measured == pytest.approx(summary.spec_tok_s / summary.baseline_tok_s)
    assert summary.tokens == sum(c.n_emitted for c in cycles) and summary.speedup_median_costs > 0
    # The streamed pass is reported on its own and counted nowhere else.
    shown = pair_up(streamed)
    assert summary.speedup_streamed == pytest.approx(
        sum(p.baseline_ms for p in shown) / sum(p.cycle_ms for p in shown))
    # c, v and the prediction come from the counted repeats' timings, like the measurement.
    timed = [e for events in repeats for e in events if isinstance(e, CycleEvent)]
    steps = [e.step_ms for events in repeats for e in events if isinstance(e, StepEvent)]
    cost = cycle_costs(timed, steps)
    assert (summary.c, summary.v, summary.step_ms) == (cost.c, cost.v, cost.step_ms)
    assert summary.speedup_predicted == pytest.approx(
        theory.speedup(summary.alpha_counted, CONFIG.k, cost.c, cost.v))


def lookup_event(proposed: int, accepted: int, verify_ms: float = 6.0) -> CycleEvent:
    return CycleEvent(index=0, tokens=[Token(1, "a", "target")] * (accepted + 1),
                      draft_ms=0.1, verify_ms=verify_ms if proposed else 4.0,
                      cycle_ms=0.1 + (verify_ms if proposed else 4.0), k=4,
                      n_accepted=accepted, rejected=accepted < proposed, draft_step_ms=[0.1],
                      overlap=[0.9] * (accepted + (accepted < proposed)),
                      n_emitted=accepted + 1, drafter="ngram", n_proposed=proposed)


def quiet_pass(cycles: list[CycleEvent]) -> list[CycleEvent | StepEvent]:
    return [e for c in cycles for e in [c, *[step(4.0)] * c.n_emitted]]


def test_prompt_lookup_is_predicted_with_prompt_lookups_formula():
    """pi and the proposals' lengths enter, as they do for `specscope generate --drafter ngram`;
    the draft model's formula would price every cycle as proposing k."""
    cycles = [lookup_event(4, 4), lookup_event(2, 1), lookup_event(0, 0), lookup_event(0, 0)]
    summary = measured_summary(cycles, [4.0] * 4, [quiet_pass(cycles)] * 2)
    assert summary.proposal_share == 0.5
    assert summary.speedup_predicted == pytest.approx(lookup.speedup(
        summary.alpha_counted, 4, 0.5, summary.c, summary.v, [2, 0, 1, 0, 1]))
    assert summary.speedup_predicted != pytest.approx(
        theory.speedup(summary.alpha_counted, 4, summary.c, summary.v))
    # and the histogram's own tokens per cycle, at the same cycle cost
    tokens = (5 + 2 + 1 + 1) / 4
    assert summary.speedup_from_histogram == pytest.approx(
        tokens / lookup.cycle_cost(0.5, summary.c, summary.v))
