"""Prompt lookup (n-gram drafting): a drafter that is no model at all.

The rule is vLLM's (``vllm/v1/spec_decode/ngram_proposer.py``, ``method: "ngram"``)::

    context = prompt + output so far
    n = the largest n in prompt_lookup_min..prompt_lookup_max such that the last n tokens of
        the context also occur earlier in it (an occurrence that has at least one token after it)
    j = the earliest such occurrence
    propose context[j + n : j + n + k]            (fewer than k when the context ends first)
    no such n: propose nothing (the cycle is a plain target step)

The proposal is deterministic, so its ``q`` is one-hot at each proposed token and the one
verification rule (:func:`engine.decoder.verify.verify`) accepts token ``x`` with probability
``p(x)`` and on a rejection samples from ``p`` without ``x``, renormalised.

vLLM finds the match with a KMP pass over the reversed context (O(len) per call); this is
the same search written as a scan per n, newest-first from the longest n. It returns at the
first n that matches, and a context of a few thousand tokens takes well under a millisecond
(the lookup's own time is measured in every cycle and is the drafter's ``c``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.analytic.lookup import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN

MAX_LOOKUP_N = 16  # longer n-grams only find what shorter ones already find


@dataclass(frozen=True)
class Proposal:
    """What one lookup proposes: ``tokens`` (0..k ids) that followed the n-gram
    ``context[start : start + n]`` matching the context's last ``n`` tokens; ``n = 0`` and
    ``start = -1`` when nothing matched."""

    tokens: list[int]
    n: int = 0
    start: int = -1


NO_PROPOSAL = Proposal([])


@dataclass(frozen=True)
class PromptLookup:
    """The drafter's settings, named as vLLM names them (``speculative_config`` keys)."""

    prompt_lookup_min: int = PROMPT_LOOKUP_MIN
    prompt_lookup_max: int = PROMPT_LOOKUP_MAX

    def validate(self) -> PromptLookup:
        """Raise ``ValueError`` with a readable message for a bad setting."""
        lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
        for name, x in (("prompt_lookup_min", lo), ("prompt_lookup_max", hi)):
            if not isinstance(x, int) or isinstance(x, bool) or not 1 <= x <= MAX_LOOKUP_N:
                raise ValueError(f"{name} must be an integer 1..{MAX_LOOKUP_N}, got {x!r}")
        if lo > hi:
            raise ValueError(
                f"prompt_lookup_min ({lo}) must not exceed prompt_lookup_max ({hi})"
            )
        return self

    def propose(self, context: Sequence[int], k: int) -> Proposal:
        """Up to ``k`` tokens for ``context`` (the prompt's ids and the output's so far)."""
        return propose(context, k, self.prompt_lookup_min, self.prompt_lookup_max)


def propose(context: Sequence[int], k: int, min_n: int, max_n: int) -> Proposal:
    """vLLM's n-gram proposal (see the module's docstring)."""
    total = len(context)
    if k <= 0 or total < min_n:
        return NO_PROPOSAL
    tokens = list(context)
    for n in range(min(max_n, total - 1), min_n - 1, -1):
        suffix = tokens[total - n :]
        first, j = suffix[0], -1
        while True:
            # An occurrence at j needs a token after it: j + n <= total - 1.
            try:
                j = tokens.index(first, j + 1, total - n)
            except ValueError:
                break
            if tokens[j : j + n] == suffix:
                return Proposal(tokens[j + n : min(j + n + k, total)], n, j)
    return NO_PROPOSAL
