"""Prompt lookup's deterministic draft through the one verification rule is lossless.

The toy language of test_verify (next-token tables that depend on the position and the
previous token). The drafter is the real prompt lookup over a fixed prefix plus the output
so far, so cycles propose k tokens, fewer, or none; ``q`` is one-hot at the proposal and the
rule is :func:`support.rules.verify` (the engine's batched rule on one row), unchanged.
Chi-square compares the first two
and the first three tokens with the target's own joint distribution; the same harness must
reject broken rules.
"""

from __future__ import annotations

from collections import Counter
from itertools import product

import pytest
import torch
from scipy.stats import chisquare
from support.rules import one_hot_q, verify, verify_greedy

from engine.decoder.ngram import propose
from engine.decoder.sampling import greedy, sample

V = 4
POSITIONS = 6
# The prefix's last 2-gram "0 1" occurs once before, two tokens from the end: the first cycle
# proposes 2 < K tokens; many 2-grams ("1 1", "0 3", ...) never occur: empty proposals.
PREFIX = [3, 3, 2, 2, 2, 0, 1, 0, 1]
K, MIN_N, MAX_N = 3, 2, 3


def tables(seed: int) -> torch.Tensor:
    """``[POSITIONS, V, V]`` next-token distributions, none below 0.4 / V."""
    gen = torch.Generator().manual_seed(seed)
    dirichlet = -torch.log(torch.rand(POSITIONS, V, V, generator=gen))
    dirichlet /= dirichlet.sum(-1, keepdim=True)
    return 0.6 * dirichlet + 0.4 / V


P = tables(seed=21)


def p_at(pos: int, prev: int) -> torch.Tensor:
    return P[min(pos, POSITIONS - 1), prev]


def generate(rule, length: int, gen: torch.Generator, lengths: Counter) -> list[int]:
    """Speculative decoding of the toy language with prompt lookup until ``length`` tokens;
    ``lengths`` counts the proposals' lengths."""
    out: list[int] = []
    while len(out) < length:
        drafts = propose(PREFIX + out, K, MIN_N, MAX_N).tokens
        lengths[len(drafts)] += 1
        prevs = ([out[-1]] if out else [PREFIX[-1]]) + drafts
        p = torch.stack([p_at(len(out) + i, prevs[i]) for i in range(len(drafts) + 1)])
        x = torch.tensor(drafts, dtype=torch.long)
        n, token = rule(x, one_hot_q(x, V), p, gen)
        out += drafts[:n] + [token]
    return out[:length]


def joint(length: int) -> torch.Tensor:
    """The target's own ``p(x1) p(x2 | x1) ...`` over all sequences, flattened in order."""
    probs = []
    for seq in product(range(V), repeat=length):
        prob, prev = 1.0, PREFIX[-1]
        for pos, token in enumerate(seq):
            prob *= float(p_at(pos, prev)[token])
            prev = token
        probs.append(prob)
    probs = torch.tensor(probs, dtype=torch.float64)
    return probs / probs.sum()  # the float32 tables sum to 1 only up to rounding


def chi_square_pvalue(rule, length: int, samples: int, seed: int) -> tuple[float, Counter]:
    gen = torch.Generator().manual_seed(seed)
    counts, lengths = torch.zeros(V**length, dtype=torch.float64), Counter()
    for _ in range(samples):
        index = 0
        for token in generate(rule, length, gen, lengths):
            index = index * V + token
        counts[index] += 1
    return chisquare(counts.numpy(), (joint(length) * samples).numpy()).pvalue, lengths


# Deliberately broken rules: the harness must catch each.


def resampling_from_p(x, q, p, gen):
    """After a rejection, draw from p itself: x can come back."""
    n, token = verify(x, q, p, gen)
    if n < len(x):
        token = int(sample(p[n], gen))
    return n, token


def accepting_everything(x, q, p, gen):
    """Trusting the lookup: every proposed token is kept."""
    return len(x), int(sample(p[len(x)], gen))


def bonus_from_the_last_draft_position(x, q, p, gen):
    """The bonus token drawn from p at the last proposed position instead of the one after."""
    n, token = verify(x, q, p, gen)
    if n == len(x) and n > 0:
        token = int(sample(p[n - 1], gen))
    return n, token


SAMPLES = 12_000


@pytest.mark.parametrize(("length", "seed"), [(3, 1), (4, 2)])
def test_lookup_drafts_leave_the_output_distributed_as_p(length, seed):
    pvalue, lengths = chi_square_pvalue(verify, length, SAMPLES, seed)
    assert pvalue > 1e-3
    # The runs held full proposals, shorter ones and empty ones (plain target steps).
    assert lengths[K] > 500 and lengths[0] > 500
    assert sum(lengths[m] for m in range(1, K)) > 500


@pytest.mark.parametrize(
    "broken", [resampling_from_p, accepting_everything, bonus_from_the_last_draft_position]
)
def test_the_chi_square_harness_rejects_broken_rules(broken):
    assert chi_square_pvalue(broken, 3, SAMPLES, seed=3)[0] < 1e-6


def test_a_one_hot_q_accepts_with_probability_p_of_the_token():
    p = torch.tensor([[0.2, 0.5, 0.3], [1 / 3, 1 / 3, 1 / 3]])
    x = torch.tensor([1])
    gen = torch.Generator().manual_seed(0)
    outcomes = [verify(x, one_hot_q(x, 3), p, gen) for _ in range(20_000)]
    accepted = sum(n for n, _ in outcomes) / len(outcomes)
    assert abs(accepted - 0.5) < 0.015
    corrections = Counter(t for n, t in outcomes if n == 0)
    assert corrections[1] == 0  # the rejected token never comes back
    assert abs(corrections[0] / sum(corrections.values()) - 0.4) < 0.02  # 0.2 / (0.2 + 0.3)


def test_an_empty_proposal_is_a_plain_target_step():
    x = torch.tensor([], dtype=torch.long)
    p = torch.tensor([[0.1, 0.6, 0.3]])
    gen = torch.Generator().manual_seed(0)
    tokens = Counter(verify(x, one_hot_q(x, 3), p, gen)[1] for _ in range(20_000))
    assert abs(tokens[1] / 20_000 - 0.6) < 0.015
    assert verify_greedy([], [2]) == (0, 2)


def test_at_temperature_0_it_is_the_argmax_test():
    gen = torch.Generator().manual_seed(5)
    for _ in range(200):
        m = int(torch.randint(0, 5, (1,), generator=gen))
        logits = torch.randn(m + 1, 6, generator=gen)
        argmax = logits.argmax(-1).tolist()
        # drafts that agree with the argmax for a while, then may not
        x = torch.tensor([a if torch.rand(1, generator=gen) < 0.7 else (a + 1) % 6
                          for a in argmax[:m]], dtype=torch.long)
        expected = verify_greedy(x.tolist(), argmax)
        assert verify(x, one_hot_q(x, 6), greedy(logits), gen) == expected
