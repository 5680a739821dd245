"""Speculative decoding (Leviathan et al. 2023, Algorithm 1), one event per cycle.

    prefill both models with the prompt
    repeat until max new tokens or end of sequence:
        draft:   x_1..x_k, x_i ~ q(. | prefix, x_1..x_{i-1})      k small steps, draft KV cache
        verify:  p_1..p_{k+1} from ONE target pass over [last, x_1..x_k]
                 (n, t) = verify(x, q, p)                          modified rejection sampling
        output:  x_1..x_n, t
        rollback both KV caches to the accepted prefix

Cache invariant (both models): the cache holds every token of the sequence except the
newest, which is the next input. After a cycle that accepted n < k drafts the draft cache
holds prefix, x_1..x_{n}; after a full acceptance it lacks x_k, so the next draft step feeds
[x_k, t] together and the draft stays in step without an extra pass.

With prompt lookup as the drafter (``lookup``, :mod:`engine.decoder.ngram`) there is no draft
model: a cycle looks up ``m`` in ``0..k`` tokens in the context, ``q`` is one-hot at them, and
the same target pass and rule judge them; ``m = 0`` is a plain target step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import torch

from engine.decoder.common import (
    Clock,
    TextDecoder,
    detokenizer,
    done_event,
    encode_prompt,
    new_generator,
    prefill,
)
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
from engine.decoder.forward import forward, new_cache, rollback
from engine.decoder.loading import ModelPair
from engine.decoder.ngram import NO_PROPOSAL, PromptLookup, Proposal, one_hot_q
from engine.decoder.sampling import check_finite, sample, warp
from engine.decoder.sampling import greedy as greedy_probs
from engine.decoder.stats import summarize
from engine.decoder.verify import verify, verify_greedy


def speculate(
    pair: ModelPair,
    config: GenerationConfig,
    *,
    baseline_step_ms: Sequence[float] | None = None,
    on_verify: Callable[[list[int], Outcome], None] | None = None,
    lookup: PromptLookup | None = None,
) -> Iterator[CycleEvent | SummaryEvent | DoneEvent]:
    """Speculative decoding: a :class:`CycleEvent` per cycle, then a :class:`SummaryEvent`
    when ``baseline_step_ms`` (the target-only run's step times) is given, then a
    :class:`DoneEvent`. Without it, call :func:`engine.decoder.stats.summarize` afterwards.

    Bad settings raise ``ValueError`` here, before anything runs. The iterator may be closed
    between cycles; it holds nothing but its own caches. ``on_verify`` sees each
    cycle's :class:`Outcome` with the token ids before it (for tests and debugging).
    ``lookup``: draft by prompt lookup instead of the pair's draft model (which may be None).
    """
    if lookup is None and pair.draft is None:
        raise ValueError("speculative decoding needs a draft model; this pair has none "
                         "(prompt lookup needs none)")
    if lookup is not None:
        lookup.validate()
    config.validate()
    prompt_ids = encode_prompt(pair, config, lookahead=config.k)
    return _speculate(pair, config, prompt_ids, baseline_step_ms, on_verify, lookup)


@dataclass
class _State:
    target_cache: object
    draft_cache: object
    last: torch.Tensor  # [1], the newest token: in neither cache yet
    draft_input: torch.Tensor  # [1, 1] or [1, 2]: what the draft has not seen yet


@dataclass
class Outcome:
    """What one cycle computed, before it is turned into an event."""

    drafts: list[int]
    q: torch.Tensor  # [k, V]
    p: torch.Tensor  # [k+1, V]
    n_accepted: int
    next_token: int
    draft_step_ms: list[float]
    draft_ms: float
    verify_ms: float
    overlap: list[float]  # sum_x min(p(x), q(x)) at the verified positions
    cycle_ms: float  # draft, verification and the bookkeeping after them
    match: Proposal = NO_PROPOSAL  # prompt lookup: the n-gram that matched, and where


def _speculate(pair, config, prompt_ids, baseline_step_ms, on_verify, lookup):
    clock = Clock(pair.device)
    generator = new_generator(pair, config.seed)
    capacity = len(prompt_ids) + config.max_new_tokens + config.k + 1
    draft_cache = None if lookup is not None else new_cache(pair.draft, capacity)
    state = _State(new_cache(pair.target, capacity), draft_cache, None, None)
    prefill_ms = prefill(pair.target, state.target_cache, prompt_ids, clock)
    if lookup is None:
        prefill_ms += prefill(pair.draft, state.draft_cache, prompt_ids, clock)
    state.last = torch.tensor([prompt_ids[-1]], device=pair.device)
    state.draft_input = state.last.view(1, 1)

    decoder = TextDecoder(detokenizer(pair.tokenizer), prompt_ids)
    out_ids: list[int] = []
    cycles: list[CycleEvent] = []
    decode_ms, stop_reason = 0.0, "length"
    while len(out_ids) < config.max_new_tokens and stop_reason != "eos":
        usable = min(config.k, config.max_new_tokens - len(out_ids))
        if lookup is None:
            outcome = _cycle(pair, state, config, generator, clock)
        else:
            context = prompt_ids + out_ids
            outcome = _lookup_cycle(pair, state, config, lookup, context, generator, clock)
        real_ms = outcome.cycle_ms
        if on_verify is not None:
            on_verify(prompt_ids + out_ids, outcome)
        outcome = _usable_part(outcome, usable)
        cycle_ms = outcome.cycle_ms
        emitted = outcome.drafts[: outcome.n_accepted] + [outcome.next_token]
        keep = min(len(emitted), config.max_new_tokens - len(out_ids))
        stops = [i for i, t in enumerate(emitted[:keep]) if t in pair.stop_token_ids]
        if stops:
            keep, stop_reason = stops[0] + 1, "eos"
        out_ids += emitted[:keep]
        decode_ms += real_ms
        event = _cycle_event(len(cycles), outcome, keep, decoder, cycle_ms, config.k,
                             "model" if lookup is None else "ngram")
        cycles.append(event)
        yield event

    if baseline_step_ms is not None:
        yield summarize(cycles, baseline_step_ms)
    yield done_event("speculative", pair, out_ids, stop_reason, prefill_ms, decode_ms)


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


@torch.inference_mode()
def _cycle(pair: ModelPair, state: _State, config: GenerationConfig, generator, clock) -> Outcome:
    start = clock.mark()
    drafts, q, step_marks = _draft(pair, state, config, generator, clock)
    mid = clock.mark()
    n, next_token, p = _verify(pair, state, drafts, q, config, generator)
    end = clock.mark()
    rejected = n < config.k
    if config.greedy:  # one-hot p and q: they overlap fully where they agree
        overlap = [1.0] * n + [0.0] * rejected
    else:
        overlap = torch.minimum(p[: n + rejected], q[: n + rejected]).sum(dim=-1).tolist()
    drafts = drafts.tolist()
    # The cycle's one wait for the device: every time of the cycle is read here.
    spans = clock.spans([start, *step_marks, mid, end, clock.mark()])
    k = config.k
    step_ms, draft_ms, verify_ms = spans[:k], sum(spans[: k + 1]), spans[k + 1]
    return Outcome(drafts, q, p, n, next_token, step_ms, draft_ms, verify_ms, overlap, sum(spans))


@torch.inference_mode()
def _lookup_cycle(pair, state, config, lookup: PromptLookup, context, generator, clock) -> Outcome:
    """One prompt-lookup cycle: the lookup (its time is the drafter's cost, once a cycle),
    then the target pass over ``[last, x_1..x_m]`` and the rule with a one-hot ``q``."""
    start = clock.mark()
    proposal = lookup.propose(context, config.k)
    mid = clock.mark()
    drafts = torch.tensor(proposal.tokens, dtype=torch.long, device=pair.device)
    q = one_hot_q(drafts, pair.shared_vocab_size)
    n, next_token, p = _judge(pair, state, drafts, q, config, generator)
    end = clock.mark()
    rejected = n < len(proposal.tokens)
    # q one-hot at x: sum_x min(p, q) = p(x), the chance that x is accepted
    overlap = torch.minimum(p[: n + rejected], q[: n + rejected]).sum(dim=-1).tolist()
    lookup_ms, verify_ms, after_ms = clock.spans([start, mid, end, clock.mark()])
    return Outcome(proposal.tokens, q, p, n, next_token, [lookup_ms], lookup_ms, verify_ms,
                   overlap, lookup_ms + verify_ms + after_ms, proposal)


def _draft(pair, state, config, generator, clock):
    """k draft steps: tokens ``[k]``, their distributions ``q [k, V]``, and a clock mark at
    the end of each step (the steps' times are read once the cycle is over).

    At temperature 0 a step is the argmax of the logits and ``q`` (one-hot) is made once for
    the cycle; otherwise a step warps the logits and samples from them.
    """
    greedy = config.greedy
    tokens, rows, marks = [], [], []
    ids = state.draft_input
    for _ in range(config.k):
        logits = forward(pair.draft, state.draft_cache, ids, keep=1)[-1, : pair.shared_vocab_size]
        if greedy:
            row, token = logits, logits.argmax()
        else:
            row = warp(logits, config.temperature, config.top_k, config.top_p)
            token = sample(row, generator)  # stays on the device: no synchronisation
        marks.append(clock.mark())  # nor here: on CUDA a mark is an event, not a wait
        tokens.append(token)
        rows.append(row)
        ids = token.view(1, 1)
    q = torch.stack(rows)
    return torch.stack(tokens), (greedy_probs(q) if greedy else q), marks


def _verify(pair, state, drafts, q, config, generator):
    """One target pass over ``[last, x_1..x_k]``, the rule, and both caches rolled back."""
    k = drafts.shape[0]
    n, next_token, p = _judge(pair, state, drafts, q, config, generator)
    nxt = state.last
    if n < k:
        # The draft cache holds ..., last, x_1..x_{k-1}; keep ..., last, x_1..x_n.
        rollback(state.draft_cache, k - 1 - n)
        state.draft_input = nxt.view(1, 1)
    else:
        # All accepted: the draft never ran on x_k; feed it with t in the next step.
        rollback(state.draft_cache, 0)
        state.draft_input = torch.cat([drafts[-1:], nxt]).view(1, 2)
    return n, next_token, p


def _judge(pair, state, drafts, q, config, generator):
    """One target pass over ``[last, x_1..x_k]`` (``k`` may be 0), the rule, the target's
    cache rolled back to the accepted prefix and ``state.last`` set to the next token."""
    k = drafts.shape[0]
    ids = torch.cat([state.last, drafts]).view(1, k + 1)
    logits = forward(pair.target, state.target_cache, ids, keep=k + 1)[:, : pair.shared_vocab_size]
    p = greedy_probs(logits) if config.greedy else warp(
        logits, config.temperature, config.top_k, config.top_p)  # [k+1, V]
    # One check for both rules (a one-hot row of NaN logits is NaN); the rule waits anyway.
    check_finite(p, q)
    if config.greedy:
        n, next_token = verify_greedy(drafts.tolist(), logits.argmax(dim=-1).tolist())
    else:
        n, next_token = verify(drafts, q, p, generator)

    # The target cache now holds ..., last, x_1..x_k; keep ..., last, x_1..x_n.
    rollback(state.target_cache, k - n)
    state.last = torch.tensor([next_token], device=pair.device)
    return n, next_token, p


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
