"""The verification rule on its own: its output is distributed exactly as the target's.

A toy "language" over V tokens: the target's and the draft's next-token distributions depend
on the position and the previous token (random tables). Speculative decoding with ``verify``
generates many sequences; chi-square compares the first token with ``p`` and the first two
tokens with the joint ``p(x1) p(x2 | x1)``. The same harness must reject broken rules.
"""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare
from support.rules import residual, verify

from engine.decoder.sampling import greedy, sample
from engine.decoder.verify import verify_batch

V = 4
START = V  # the "previous token" of the first position
POSITIONS = 6  # table rows; later positions reuse the last one


def tables(seed: int) -> torch.Tensor:
    """``[POSITIONS, V + 1, V]`` next-token distributions, none below 0.4 / V."""
    gen = torch.Generator().manual_seed(seed)
    dirichlet = -torch.log(torch.rand(POSITIONS, V + 1, V, generator=gen))
    dirichlet /= dirichlet.sum(-1, keepdim=True)
    return 0.6 * dirichlet + 0.4 / V


P, Q = tables(seed=11), tables(seed=12)


def generate(rule, k: int, length: int, gen: torch.Generator, greedy_draft: bool = False
             ) -> list[int]:
    """Speculative decoding of the toy language with ``rule`` until ``length`` tokens;
    ``greedy_draft``: the draft proposes its argmax and the rule gets no ``q`` (one-hot)."""
    out: list[int] = []
    while len(out) < length:
        pos, prev = len(out), (out[-1] if out else START)
        drafts, qs, ps = [], [], []
        for i in range(k + 1):
            row = min(pos + i, POSITIONS - 1)
            ps.append(P[row, prev])
            if i < k:
                qs.append(Q[row, prev])
                prev = int(qs[-1].argmax()) if greedy_draft else int(sample(qs[-1], gen))
                drafts.append(prev)
        q = None if greedy_draft and rule is verify else torch.stack(qs)
        n, token = rule(torch.tensor(drafts), q, torch.stack(ps), gen)
        out += drafts[:n] + [token]
    return out[:length]


def chi_square_pvalue(rule, k: int, length: int, samples: int, seed: int,
                      greedy_draft: bool = False) -> float:
    gen = torch.Generator().manual_seed(seed)
    counts = torch.zeros(V**length)
    for _ in range(samples):
        seq = generate(rule, k, length, gen, greedy_draft)
        index = 0
        for token in seq:
            index = index * V + token
        counts[index] += 1
    first = P[0, START]
    # p(x1), or the joint p(x1) p(x2 | x1) flattened like ``index``
    expected = first if length == 1 else (first[:, None] * P[1, :V]).reshape(-1)
    return chisquare(counts.numpy(), (expected * samples).numpy()).pvalue


# Deliberately broken rules: the harness must catch each.


def verify_resampling_from_p(draft_tokens, q, p, generator):
    """The classic bug: after a rejection, draw from p instead of norm(max(0, p - q))."""
    n, token = verify(draft_tokens, q, p, generator)
    if n < len(draft_tokens):
        token = int(sample(p[n], generator))
    return n, token


def verify_accepting_with_p(draft_tokens, q, p, generator):
    """Accepts x with probability p(x) instead of min(1, p(x) / q(x))."""
    k = len(draft_tokens)
    u = torch.rand(k, generator=generator)
    accepted = u < p[torch.arange(k), draft_tokens]
    n = int(accepted.long().cumprod(0).sum())
    nxt = p[k] if n == k else residual(p[n], q[n])
    return n, int(sample(nxt, generator))


def verify_bonus_off_by_one(draft_tokens, q, p, generator):
    """Draws the bonus token from p[k - 1] instead of p[k]: only the joint test can see it."""
    n, token = verify(draft_tokens, q, p, generator)
    if n == len(draft_tokens):
        token = int(sample(p[n - 1], generator))
    return n, token


SAMPLES = 12_000


@pytest.mark.parametrize("k", [1, 3])
def test_first_token_is_distributed_as_p(k):
    assert chi_square_pvalue(verify, k, length=1, samples=SAMPLES, seed=k) > 1e-3


@pytest.mark.parametrize("k", [1, 3])
def test_first_two_tokens_are_jointly_distributed_as_p(k):
    assert chi_square_pvalue(verify, k, length=2, samples=SAMPLES, seed=10 + k) > 1e-3


@pytest.mark.parametrize(
    "broken", [verify_resampling_from_p, verify_accepting_with_p, verify_bonus_off_by_one]
)
def test_the_chi_square_harness_rejects_broken_rules(broken):
    assert chi_square_pvalue(broken, 1, length=2, samples=SAMPLES, seed=11) < 1e-6


@pytest.mark.parametrize("k", [1, 3])
def test_greedy_drafts_judged_as_one_hot_leave_the_output_distributed_as_p(k):
    """vLLM's ``draft_sample_method: greedy``: the draft's argmax, q one-hot (None)."""
    assert chi_square_pvalue(verify, k, length=2, samples=SAMPLES, seed=20 + k,
                             greedy_draft=True) > 1e-3


def test_greedy_drafts_judged_with_the_drafts_real_q_are_caught():
    """The bug a one-hot proposal invites: judging the argmax with min(1, p/q) of the
    draft's real q, as if it had been sampled from q."""
    def real_q(draft_tokens, q, p, generator):
        return verify(draft_tokens, q, p, generator)

    assert chi_square_pvalue(real_q, 1, length=2, samples=SAMPLES, seed=21,
                             greedy_draft=True) < 1e-6


def test_a_batch_judges_each_row_as_it_is_judged_alone():
    """verify_batch over rows of different proposal lengths (0..k), with and without q,
    gives each row the outcome verify gives it alone with the same uniforms."""
    gen = torch.Generator().manual_seed(7)
    k, batch = 4, 6
    p = tables(30)[:k + 1, 0].expand(batch, -1, -1).clone()
    p = (p + 0.3 * torch.rand(p.shape, generator=gen)).softmax(-1)
    q = (tables(31)[:k, 0].expand(batch, -1, -1) + torch.rand((batch, k, V), generator=gen)
         ).softmax(-1)
    drafts = torch.randint(0, V, (batch, k), generator=gen)
    lengths = torch.tensor([4, 0, 2, 4, 1, 3])
    for trial in range(50):
        seeds = [trial * 10 + b for b in range(batch)]
        for one_hot in (False, True):
            u = torch.stack([torch.rand(k + 1, generator=torch.Generator().manual_seed(s))
                             for s in seeds])
            n, token = verify_batch(drafts, None if one_hot else q, p, lengths, u)
            for b, s in enumerate(seeds):
                m = int(lengths[b])
                alone = verify(drafts[b, :m], None if one_hot else q[b, :m], p[b, : m + 1],
                               torch.Generator().manual_seed(s))
                assert (int(n[b]), int(token[b])) == alone


def test_greedy_distributions_reduce_to_argmax_matching():
    logits_p = torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 1.0], [0.0, 0.0, 5.0], [1.0, 0.0, 0.0]])
    logits_q = torch.tensor([[0.0, 4.0, 1.0], [5.0, 0.0, 1.0], [9.0, 0.0, 1.0]])
    p, q = greedy(logits_p), greedy(logits_q)
    drafts = logits_q.argmax(-1)  # [1, 0, 0]: the first two are the target's argmax
    for seed in range(5):
        assert verify(drafts, q, p, torch.Generator().manual_seed(seed)) == (2, 2)
    all_right = torch.tensor([1, 0, 2])
    q_all = greedy(logits_p[:3])
    assert verify(all_right, q_all, p, torch.Generator().manual_seed(0)) == (3, 0)


def test_identical_distributions_accept_everything():
    gen = torch.Generator().manual_seed(0)
    p = tables(3)[:5, 0]
    for _ in range(200):
        drafts = sample(p[:4], gen)
        assert verify(drafts, p[:4], p, gen)[0] == 4


def test_residual_is_normalised_and_falls_back_to_p():
    p, q = torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.5, 0.3])
    assert torch.allclose(residual(p, q), torch.tensor([1.0, 0.0, 0.0]))
    assert torch.allclose(residual(p, p.clone()), p)
