"""Speculative decoding (Leviathan et al. 2023, Algorithm 1), one event per cycle.

    prefill both models with the prompt
    repeat until max new tokens or end of sequence:
        draft:   x_1..x_k, x_i ~ q(. | prefix, x_1..x_{i-1})      k small steps, draft KV cache
        verify:  p_1..p_{k+1} from ONE target pass over [last, x_1..x_k]
                 (n, t) = verify_batch(x, q, p, ...)               modified rejection sampling
        output:  x_1..x_n, t
        rollback both KV caches to the accepted prefix

The cycle is the batched loop's step (:class:`engine.decoder.step.Stepper`) with one row: this
module turns each step into the single stream's richer :class:`CycleEvent` (each token's kind,
the cycle's times, the overlap ``sum_x min(p, q)`` at each verified position).

With prompt lookup as the drafter (:mod:`engine.decoder.ngram`) there is no draft model: a
cycle looks up ``m`` in ``0..k`` tokens in the context, ``q`` is one-hot at them, and
the same target pass and rule judge them; ``m = 0`` is a plain target step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import torch

from engine.decoder import tree_speculative
from engine.decoder.batched import BatchConfig, Decoding, new_stepper
from engine.decoder.common import (
    Clock,
    TextDecoder,
    detokenizer,
    done_event,
    encode_prompt,
)
from engine.decoder.drafter_spec import DRAFT_MODEL, DrafterSpec
from engine.decoder.eagle_tree import speculate_eagle_tree
from engine.decoder.events import (
    ACCEPTED,
    DISCARDED,
    REJECTED,
    TARGET,
    CycleEvent,
    DoneEvent,
    GenerationConfig,
    SummaryEvent,
    Token,
)
from engine.decoder.loading import ModelPair
from engine.decoder.ngram import NO_PROPOSAL, Proposal
from engine.decoder.stats import summarize


def speculate(
    pair: ModelPair,
    config: GenerationConfig,
    *,
    baseline_step_ms: Sequence[float] | None = None,
    on_verify: Callable[[list[int], Outcome], None] | None = None,
    drafter: DrafterSpec = DRAFT_MODEL,
) -> Iterator[CycleEvent | SummaryEvent | DoneEvent]:
    """Speculative decoding: a :class:`CycleEvent` per cycle, then a :class:`SummaryEvent`
    when ``baseline_step_ms`` (the target-only run's step times) is given, then a
    :class:`DoneEvent`. Without it, call :func:`engine.decoder.stats.summarize` afterwards.

    Bad settings raise ``ValueError`` here, before anything runs. The iterator may be closed
    between cycles; it holds nothing but its own caches. ``on_verify`` sees each
    cycle's :class:`Outcome` with the token ids before it (for tests and debugging).
    ``drafter``: what proposes (the pair's draft model by default).
    """
    config.validate()
    drafter.check(pair, config.k)
    if drafter.tree:
        return _tree(_tree_cycles(pair, config, drafter), baseline_step_ms)
    prompt_ids = encode_prompt(pair, config, lookahead=config.k)
    return _speculate(pair, config, prompt_ids, baseline_step_ms, on_verify, drafter)


@dataclass
class Outcome:
    """What one cycle computed, before it is turned into an event."""

    drafts: list[int]
    q: torch.Tensor  # [m, V]
    p: torch.Tensor  # [m+1, V]
    n_accepted: int
    next_token: int
    draft_step_ms: list[float]
    draft_ms: float
    verify_ms: float
    overlap: list[float]  # sum_x min(p(x), q(x)) at the verified positions
    cycle_ms: float  # draft, verification and the bookkeeping after them
    match: Proposal = NO_PROPOSAL  # prompt lookup: the n-gram that matched, and where


def _tree_cycles(pair, config, drafter: DrafterSpec):
    """The spec's tree run as cycle events: a static tree of the draft model's or the Medusa
    heads', or EAGLE-2's."""
    paths = drafter.tree
    if drafter.kind == "eagle":
        run, paths = speculate_eagle_tree(pair, config, drafter.head, drafter.tree), ()
    elif drafter.kind == "model":
        run = tree_speculative.speculate_draft_tree(pair, config, drafter.tree)
    else:
        run = tree_speculative.speculate_tree(pair, config, drafter.head, drafter.tree)
    return tree_speculative.cycle_events(pair, config, run, drafter.kind,
                                         drafter.lookahead(config.k), drafter.depth,
                                         drafter.tree_text, paths)


def _tree(run, baseline_step_ms):
    """A token tree's cycles (``on_verify`` sees chains only), then the summary as for a
    chain."""
    cycles = []
    try:
        for event in run:
            if isinstance(event, CycleEvent):
                cycles.append(event)
            elif baseline_step_ms is not None:
                yield summarize(cycles, baseline_step_ms)
            yield event
    finally:
        run.close()


def _speculate(pair, config, prompt_ids, baseline_step_ms, on_verify, drafter: DrafterSpec):
    clock = Clock(pair.device)
    one = BatchConfig([config.prompt], k=config.k, temperature=config.temperature,
                      top_p=config.top_p, top_k=config.top_k,
                      max_new_tokens=config.max_new_tokens, seeds=config.seed,
                      draft_sample=config.draft_sample)
    start = clock()
    stepper = new_stepper(pair, one, [prompt_ids], config.k, drafter, clock, distributions=True)
    prefill_ms = clock() - start

    decoder = TextDecoder(detokenizer(pair.tokenizer), prompt_ids)
    decoding = Decoding(stepper, [config.max_new_tokens], pair.stop_token_ids)
    cycles: list[CycleEvent] = []
    decode_ms = 0.0
    for emitted in decoding.steps(lambda _step, _live: config.k):
        result, times = emitted.result, emitted.result.times
        m = len(result.drafts[0])
        real_ms = times.total_ms + emitted.emit_ms
        outcome = Outcome(
            result.drafts[0], result.q[0, :m], result.p[0, : m + 1], result.n_accepted[0],
            result.next_tokens[0], result.draft_step_ms, times.draft_ms, times.verify_ms,
            result.overlap[0], real_ms,
            result.matches[0] if result.matches is not None else NO_PROPOSAL)
        if on_verify is not None:
            on_verify(prompt_ids + decoding.out[0][: emitted.before[0]], outcome)
        usable = min(config.k, config.max_new_tokens - emitted.before[0])
        outcome = _usable_part(outcome, usable)
        decode_ms += real_ms
        event = _cycle_event(len(cycles), outcome, emitted.kept[0], decoder, outcome.cycle_ms,
                             config.k, drafter.kind)
        cycles.append(event)
        yield event

    if baseline_step_ms is not None:
        yield summarize(cycles, baseline_step_ms)
    yield done_event("speculative", pair, decoding.out[0], decoding.stop_reasons[0], prefill_ms,
                     decode_ms)


def _usable_part(outcome: Outcome, usable: int) -> Outcome:
    """The cycle as its times count: when fewer than k tokens were left to generate, the
    draft steps past ``usable`` could never reach the output (vLLM drafts k in its last cycle
    too, and its counters count all k). Their times leave ``draft_step_ms``, ``draft_ms`` and
    ``cycle_ms``, so c and the speedup price only work a longer run would use; the
    verification pass is one pass over k + 1 positions whatever is left, and stays in v."""
    if usable >= len(outcome.draft_step_ms):
        return outcome
    wasted = sum(outcome.draft_step_ms[usable:])
    return replace(outcome, draft_step_ms=outcome.draft_step_ms[:usable],
                   draft_ms=outcome.draft_ms - wasted, cycle_ms=outcome.cycle_ms - wasted)


MATCH_CONTEXT = 6  # tokens of text shown before a prompt-lookup match's earlier occurrence


def _cycle_event(
    index, outcome: Outcome, keep, decoder: TextDecoder, cycle_ms, k, drafter
) -> CycleEvent:
    """The cycle as shown; ``keep`` of its ``n + 1`` output tokens made it into the output."""
    n, m = outcome.n_accepted, len(outcome.drafts)  # m = k but for prompt lookup
    match_text = match_before = ""
    if outcome.match.n:  # the decoder holds the context the proposal was looked up in
        start, end = outcome.match.start, outcome.match.start + outcome.match.n
        decode = decoder.tokenizer.decode
        match_text = decode(decoder.ids[start:end], skip_special_tokens=True)
        before = decode(decoder.ids[max(start - MATCH_CONTEXT, 0):end], skip_special_tokens=True)
        match_before = before[: max(len(before) - len(match_text), 0)]
    shown = min(n, keep)  # accepted drafts inside the output
    kinds = [ACCEPTED] * shown + [REJECTED if i == n else DISCARDED for i in range(shown, m)]
    texts = [decoder.push(t) for t in outcome.drafts[:shown]]
    texts += decoder.peek(outcome.drafts[shown:])
    tokens = [Token(t, s, kind) for t, s, kind in zip(outcome.drafts, texts, kinds, strict=True)]
    if keep > n:
        tokens.append(Token(outcome.next_token, decoder.push(outcome.next_token), TARGET))
    return CycleEvent(
        index=index,
        tokens=tokens,
        draft_ms=outcome.draft_ms,
        verify_ms=outcome.verify_ms,
        cycle_ms=cycle_ms,
        k=k,
        n_accepted=n,
        rejected=n < m,
        draft_step_ms=outcome.draft_step_ms,
        overlap=outcome.overlap,
        n_emitted=keep,
        drafter=drafter,
        n_proposed=m,
        match_n=outcome.match.n,
        match_start=outcome.match.start,
        match_text=match_text,
        match_before=match_before,
    )
