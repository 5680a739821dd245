"""What a cycle's times count (docs/design.md, "The last cycle"): the clock's marks and spans,
times that add up, and a last cycle whose unusable draft steps stay out of c and the speedup.
On CUDA the clock records events and waits once per cycle; benchmarks/gpu_check.sh checks
that part (benchmarks/cuda_clock.py), as no test here has a GPU."""

from __future__ import annotations

import time

import pytest
import torch

from engine.decoder.common import Clock
from engine.decoder.events import CycleEvent, DoneEvent, GenerationConfig
from engine.decoder.speculative import speculate


def test_on_the_cpu_a_mark_is_the_wall_time_and_spans_are_the_gaps():
    clock = Clock(torch.device("cpu"))
    marks = [clock.mark()]
    for pause_s in (0.002, 0.0, 0.004):
        time.sleep(pause_s)
        marks.append(clock.mark())
    spans = clock.spans(marks)
    assert len(spans) == 3 and all(s >= 0 for s in spans)
    assert spans[0] >= 2.0 and spans[2] >= 4.0
    assert sum(spans) == pytest.approx(marks[-1] - marks[0])


def run(pair, k: int, max_new_tokens: int, temperature: float = 0.0):
    """The cycle events, the done event, and the cycles as computed (before the last-cycle
    rule)."""
    outcomes = []
    config = GenerationConfig("the quick brown fox", k=k, temperature=temperature,
                              max_new_tokens=max_new_tokens, seed=1)
    events = list(speculate(pair, config, on_verify=lambda _ids, o: outcomes.append(o)))
    cycles = [e for e in events if isinstance(e, CycleEvent)]
    (done,) = [e for e in events if isinstance(e, DoneEvent)]
    return cycles, done, outcomes


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_cycles_times_add_up(good_pair, temperature):
    cycles, done, _ = run(good_pair, k=3, max_new_tokens=24, temperature=temperature)
    for c in cycles:
        assert all(ms > 0 for ms in c.draft_step_ms) and c.verify_ms > 0
        assert sum(c.draft_step_ms) <= c.draft_ms + 1e-9
        assert c.draft_ms + c.verify_ms <= c.cycle_ms + 1e-9


def test_the_last_cycle_times_only_the_draft_steps_the_output_can_use(twin_pair):
    # A draft identical to the target accepts all k = 4: the first cycle gives 5 tokens,
    # so the second has 2 left to give; it still drafts 4 (as vLLM does), and verifies them.
    cycles, done, outcomes = run(twin_pair, k=4, max_new_tokens=7)
    assert [c.n_emitted for c in cycles] == [5, 2]
    assert [len(o.draft_step_ms) for o in outcomes] == [4, 4]  # drafted: k every cycle
    first, last = cycles
    assert first.draft_step_ms == outcomes[0].draft_step_ms
    assert (first.draft_ms, first.cycle_ms) == (outcomes[0].draft_ms, outcomes[0].cycle_ms)
    # timed: the 2 usable draft steps; the 2 after them leave draft_ms and cycle_ms too
    wasted = sum(outcomes[1].draft_step_ms[2:])
    assert last.draft_step_ms == outcomes[1].draft_step_ms[:2]
    assert last.draft_ms == pytest.approx(outcomes[1].draft_ms - wasted)
    assert last.cycle_ms == pytest.approx(outcomes[1].cycle_ms - wasted)
    # the verification pass is one pass over k + 1 positions, whatever is left: it stays
    assert last.verify_ms == outcomes[1].verify_ms
    # the counts are the verification's, all k of them (vLLM's counters count them too)
    assert (last.k, last.n_accepted) == (4, 4)
    # the run's own wall time is what it spent, waste included
    assert done.decode_ms == pytest.approx(sum(o.cycle_ms for o in outcomes))


@pytest.mark.parametrize("max_new_tokens", [5, 10])
def test_a_last_cycle_with_k_or_more_tokens_left_is_timed_whole(twin_pair, max_new_tokens):
    cycles, _, outcomes = run(twin_pair, k=4, max_new_tokens=max_new_tokens)
    for c, o in zip(cycles, outcomes, strict=True):
        assert (c.draft_step_ms, c.draft_ms, c.cycle_ms) == (o.draft_step_ms, o.draft_ms,
                                                            o.cycle_ms)
