"""The speculative loop with prompt lookup as its drafter: the target alone, no draft model.

Cycles propose k tokens, fewer, or none (then the cycle is one target token); the output is
the target's (exactly at temperature 0; distributions checked against fresh forward passes
above it), and the events and the summary say what was proposed.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from engine.decoder.baseline import run_target_only
from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.events import (
    ACCEPTED,
    DISCARDED,
    REJECTED,
    TARGET,
    CycleEvent,
    DoneEvent,
    GenerationConfig,
    SummaryEvent,
)
from engine.decoder.forward import forward, new_cache
from engine.decoder.ngram import PromptLookup, propose
from engine.decoder.sampling import warp
from engine.decoder.speculative import speculate

# Repeats itself, so that 1- and 2-grams of the prompt and of the output match often.
PROMPT = "the quick brown fox jumps over the lazy dog and the quick brown fox sat on the mat"


LOOKUP = PromptLookup(1, 3)


def run(pair, lookup=LOOKUP, **settings):
    *cycles, done = speculate(pair, GenerationConfig(prompt=PROMPT, **settings),
                              drafter=DrafterSpec.ngram(lookup))
    assert isinstance(done, DoneEvent)
    return cycles, done


def from_scratch(model, ids: list[int], keep: int) -> torch.Tensor:
    with torch.inference_mode():
        return forward(model, new_cache(model), torch.tensor([ids]), keep=keep)


@pytest.mark.parametrize("pair_name", ["target_only_pair", "good_pair"])
@pytest.mark.parametrize(("k", "lo", "hi"), [(1, 1, 1), (4, 1, 3), (6, 2, 4), (3, 5, 5)])
def test_greedy_lookup_equals_target_greedy_decoding(request, pair_name, k, lo, hi):
    pair = request.getfixturevalue(pair_name)
    config = GenerationConfig(prompt=PROMPT, k=k, temperature=0.0, max_new_tokens=40)
    _, baseline = run_target_only(pair, config)
    cycles, done = run(pair, PromptLookup(lo, hi), k=k, temperature=0.0, max_new_tokens=40)
    assert done.token_ids == baseline.token_ids
    assert all(c.drafter == "ngram" and 0 <= c.proposed <= k for c in cycles)
    if lo == 1:
        assert sum(c.proposed > 0 for c in cycles) > len(cycles) // 2


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [(1.0, 0, 1.0), (0.7, 20, 0.9)])
def test_distributions_and_proposals_match_fresh_passes_and_the_rule(
    target_only_pair, temperature, top_k, top_p
):
    """p as the loop computed it over its rolled-back cache equals a fresh forward pass over
    the context and the proposal; the proposal is the lookup's on that context; q is one-hot."""
    pair, k = target_only_pair, 8
    seen = {"full": 0, "short": 0, "empty": 0, "rejection": 0}

    def check(context: list[int], outcome) -> None:
        m = len(outcome.drafts)
        assert outcome.drafts == propose(context, k, 1, 3).tokens
        logits = from_scratch(pair.target, context + outcome.drafts, m + 1)
        p = warp(logits[:, : pair.shared_vocab_size], temperature, top_k, top_p)
        torch.testing.assert_close(outcome.p, p, atol=1e-5, rtol=1e-4)
        assert outcome.q.shape == (m, pair.shared_vocab_size)
        assert (outcome.q.sum(-1) == 1).all() and (outcome.q.max(-1).values == 1).all()
        seen["full" if m == k else "short" if m else "empty"] += 1
        seen["rejection"] += outcome.n_accepted < m

    config = GenerationConfig(prompt=PROMPT, k=k, temperature=temperature, top_k=top_k,
                              top_p=top_p, max_new_tokens=120, seed=3)
    list(speculate(pair, config, on_verify=check, drafter=DrafterSpec.ngram(PromptLookup(1, 3))))
    assert all(n >= 2 for n in seen.values()), seen


def test_cycles_show_short_and_empty_proposals(target_only_pair):
    cycles, done = run(target_only_pair, k=4, temperature=1.0, max_new_tokens=80, seed=1)
    kinds = {"full": 0, "short": 0, "empty": 0}
    for cycle in cycles[:-1]:
        m, n = cycle.proposed, cycle.n_accepted
        shown = [t.kind for t in cycle.tokens]
        if m == 0:
            kinds["empty"] += 1
            assert shown == [TARGET] and cycle.n_emitted == 1 and not cycle.rejected
            assert cycle.overlap == [] and cycle.match_n == 0
        else:
            kinds["full" if m == 4 else "short"] += 1
            rest = [REJECTED] + [DISCARDED] * (m - n - 1) if n < m else []
            assert shown == [ACCEPTED] * n + rest + [TARGET]
            assert cycle.rejected == (n < m) and len(cycle.overlap) == n + (n < m)
            assert 1 <= cycle.match_n <= 3 and cycle.match_start >= 0
        assert len(cycle.draft_step_ms) == 1  # one lookup a cycle
        json.dumps(dataclasses.asdict(cycle))
    assert all(kinds.values()), kinds
    output = [t.id for c in cycles for t in c.tokens if t.kind in (ACCEPTED, TARGET)]
    assert output == done.token_ids


def test_the_summary_counts_proposals_and_their_share(target_only_pair):
    config = GenerationConfig(prompt=PROMPT, k=4, temperature=0.0, max_new_tokens=40)
    steps, _ = run_target_only(target_only_pair, config)
    *events, _ = speculate(target_only_pair, config, drafter=DrafterSpec.ngram(PromptLookup(1, 3)),
                           baseline_step_ms=[s.step_ms for s in steps])
    summary, cycles = events[-1], events[:-1]
    assert isinstance(summary, SummaryEvent) and all(isinstance(c, CycleEvent) for c in cycles)
    proposing = [c for c in cycles if c.proposed]
    assert summary.drafter == "ngram"
    assert summary.proposal_share == len(proposing) / len(cycles)
    assert summary.drafted == sum(c.proposed for c in cycles)
    assert summary.trials == sum(c.n_accepted + c.rejected for c in cycles)
    assert 0 < summary.c < 1  # a lookup is far cheaper than a target step


def test_the_same_seed_gives_the_same_tokens(target_only_pair):
    first = run(target_only_pair, k=3, temperature=0.9, max_new_tokens=30, seed=7)[1].token_ids
    assert run(target_only_pair, k=3, temperature=0.9, max_new_tokens=30,
               seed=7)[1].token_ids == first
    assert run(target_only_pair, k=3, temperature=0.9, max_new_tokens=30,
               seed=8)[1].token_ids != first


@pytest.mark.parametrize("max_new_tokens", [1, 2, 7, 13])
def test_max_new_tokens_is_exact(target_only_pair, max_new_tokens):
    cycles, done = run(target_only_pair, k=4, temperature=0.0, max_new_tokens=max_new_tokens)
    assert len(done.token_ids) == max_new_tokens
    assert sum(c.n_emitted for c in cycles) == max_new_tokens


def test_bad_lookup_settings_are_refused_before_running(target_only_pair):
    with pytest.raises(ValueError, match="must not exceed"):
        speculate(target_only_pair, GenerationConfig(PROMPT),
                  drafter=DrafterSpec.ngram(PromptLookup(3, 2)))
    with pytest.raises(ValueError, match="prompt lookup needs none"):
        speculate(target_only_pair, GenerationConfig(PROMPT))


def test_a_proposing_cycle_names_the_matched_text_and_what_came_before_it(target_only_pair):
    from engine.decoder.common import encode_prompt

    config = GenerationConfig(prompt=PROMPT, k=4, temperature=0.0, max_new_tokens=40, seed=0)
    *cycles, done = speculate(target_only_pair, config, drafter=DrafterSpec.ngram(LOOKUP))
    context = encode_prompt(target_only_pair, config, lookahead=config.k)
    decode = target_only_pair.tokenizer.decode
    matched = 0
    for cycle in cycles:
        if cycle.match_n == 0:
            assert (cycle.match_text, cycle.match_before) == ("", "")
        else:
            matched += 1
            start, end = cycle.match_start, cycle.match_start + cycle.match_n
            assert cycle.match_text == decode(context[start:end], skip_special_tokens=True)
            # the n-gram is the context's own suffix, found again earlier
            assert context[start:end] == context[-cycle.match_n:]
            before = decode(context[max(start - 6, 0):end], skip_special_tokens=True)
            assert before == cycle.match_before + cycle.match_text
        context += [t.id for t in cycle.tokens if t.kind in (ACCEPTED, TARGET)]
    assert matched >= 3
