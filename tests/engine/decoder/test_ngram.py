"""Prompt lookup proposes what vLLM's n-gram proposer proposes.

Two references: a brute force written from the rule's words (longest n first, earliest
occurrence, at most k tokens, never past the context's end), and vLLM's own KMP search over
the reversed context (``vllm/v1/spec_decode/ngram_proposer.py``,
``_find_longest_matched_ngram_and_propose_tokens``, Apache-2.0), transcribed without numba.
Random contexts with copied spans, some over tiny alphabets, make matches, overlaps and
ties common.
"""

from __future__ import annotations

import random

import pytest

from engine.decoder.ngram import (
    MAX_LOOKUP_N,
    NO_PROPOSAL,
    PROMPT_LOOKUP_MAX,
    PROMPT_LOOKUP_MIN,
    PromptLookup,
    Proposal,
    propose,
)


def brute_force(context: list[int], k: int, min_n: int, max_n: int) -> list[int]:
    for n in range(max_n, min_n - 1, -1):
        if n >= len(context):
            continue
        suffix = context[-n:]
        for j in range(len(context) - n):  # j + n < len(context): a token follows
            if context[j : j + n] == suffix:
                return context[j + n : j + n + k]
    return []


def vllm_kmp(origin: list[int], min_ngram: int, max_ngram: int, k: int) -> list[int]:
    """vLLM 0.32's search, line for line (max_model_len taken as unbounded)."""
    total = len(origin)
    if total < min_ngram or k <= 0:
        return []
    tokens = origin[::-1]
    lps = [0] * max_ngram
    longest, position, prev, i = 0, 0, 0, 1
    while i < total:
        if tokens[prev] == tokens[i]:
            prev += 1
            if prev >= longest:
                longest, position = prev, i
            if i < max_ngram:
                lps[i] = prev
            if prev == max_ngram:
                prev = lps[max_ngram - 1]
            i += 1
        elif prev != 0:
            prev = lps[prev - 1]
        else:
            i += 1
    if longest < min_ngram:
        return []
    start = total - 1 - position + longest
    return origin[start : start + min(k, total - start)]


def random_context(rng: random.Random, alphabet: int, length: int) -> list[int]:
    """Random tokens with copied spans, like text that repeats itself."""
    context: list[int] = []
    while len(context) < length:
        if context and rng.random() < 0.3:
            start = rng.randrange(len(context))
            context += context[start : start + rng.randrange(1, 8)]
        else:
            context.append(rng.randrange(alphabet))
    return context[:length]


@pytest.mark.parametrize("alphabet", [2, 3, 5, 40])
@pytest.mark.parametrize(("min_n", "max_n"), [(1, 1), (1, 3), (2, 4), (3, 5), (5, 5)])
def test_random_contexts_match_both_references(alphabet, min_n, max_n):
    rng = random.Random(alphabet * 100 + min_n * 10 + max_n)
    proposals = 0
    for _ in range(300):
        context = random_context(rng, alphabet, rng.randrange(0, 60))
        k = rng.randrange(1, 9)
        got = propose(context, k, min_n, max_n)
        assert got.tokens == brute_force(context, k, min_n, max_n), context
        assert got.tokens == vllm_kmp(context, min_n, max_n, k), context
        proposals += bool(got.tokens)
    assert proposals > 20  # the comparison saw real matches, not only empty proposals


def test_the_match_is_reported_where_it_was_found():
    context = [7, 1, 2, 3, 9, 9, 1, 2, 3, 8, 1, 2, 3]
    got = propose(context, k=2, min_n=2, max_n=4)
    assert got == Proposal([9, 9], n=3, start=1)  # the earliest of the two occurrences
    assert context[got.start : got.start + got.n] == context[-got.n :]


def test_the_longest_n_wins_over_an_earlier_shorter_match():
    context = [2, 3, 5, 1, 2, 3, 6, 2, 3]  # "2 3" at 0 and 4; "1 2 3" never earlier
    assert propose(context, 3, 2, 4).tokens == [5, 1, 2]
    context = [2, 3, 5, 1, 2, 3, 6, 1, 2, 3]  # "1 2 3" occurs at 3: longer beats earlier
    assert propose(context, 3, 2, 4) == Proposal([6, 1, 2], n=3, start=3)


def test_a_match_near_the_end_proposes_fewer_than_k():
    context = [4, 5, 6, 4, 5]  # "4 5" followed by one token, then the context ends
    assert propose(context, 8, 2, 2).tokens == [6, 4, 5]
    assert propose([1, 1, 1], 5, 1, 2).tokens == [1]  # overlapping occurrence at 0


def test_no_match_no_proposal():
    assert propose([1, 2, 3, 4], 4, 1, 3) == NO_PROPOSAL
    assert propose([1, 2, 1, 2], 4, 3, 4) == NO_PROPOSAL  # only a 2-gram repeats
    assert propose([1], 4, 1, 1) == NO_PROPOSAL  # shorter than any n with a follower
    assert propose([], 4, 1, 1) == NO_PROPOSAL


def test_the_defaults_are_stated_and_valid():
    lookup = PromptLookup()
    assert (lookup.prompt_lookup_min, lookup.prompt_lookup_max) == (
        PROMPT_LOOKUP_MIN, PROMPT_LOOKUP_MAX)
    assert lookup.validate() is lookup
    assert lookup.propose([9, 1, 2, 7, 1, 2], 4).tokens == [7, 1, 2]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"prompt_lookup_min": 0}, "prompt_lookup_min must be an integer 1.."),
        ({"prompt_lookup_max": MAX_LOOKUP_N + 1}, "prompt_lookup_max must be an integer 1.."),
        ({"prompt_lookup_min": 2.0}, "prompt_lookup_min must be an integer"),
        ({"prompt_lookup_min": 4, "prompt_lookup_max": 3}, "must not exceed"),
    ],
)
def test_bad_settings_are_refused_with_a_reason(settings, message):
    with pytest.raises(ValueError, match=message):
        PromptLookup(**settings).validate()
