"""The EAGLE head as a drafter of the engine's one step: lossless as the other drafters are
(greedy equals the target's own greedy decoding, sampled tokens are distributed as the
target's and a broken rule is caught), each row independent of its companions, and the head's
q at every cycle what a fresh head over the row's whole verified sequence gives."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from support.lossless import chi_square_pvalue, target_marginals, token_counts
from support.runs import run_batch

import engine.decoder.batched as batched
import engine.decoder.step as step_module
from engine.decoder.baseline import run_target_only
from engine.decoder.batched import BatchConfig
from engine.decoder.common import encode_prompt
from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.eagle import EagleHead, head_config, load_head_for, target_features
from engine.decoder.events import CycleEvent, GenerationConfig
from engine.decoder.forward import forward, new_cache
from engine.decoder.loading import load_pair
from engine.decoder.sampling import sample_with, warp
from engine.decoder.speculative import speculate
from engine.decoder.verify import verify_batch

MODELS = Path(__file__).parents[3] / "models"
PROMPT = "the quick brown fox"
COMPANIONS = [
    "the",
    "speculative decoding drafts tokens with a small model and verifies them with a large one",
    "héllo wörld, ça va?",
    "the cat sat on the mat and the lazy dog",
]


@pytest.fixture(scope="module")
def shipped():
    """The shipped target (no draft model) and the head trained for it."""
    pair = load_pair(str(MODELS / "target"), None, device="cpu")
    return pair, load_head_for(pair, MODELS / "eagle")


@pytest.fixture(scope="module")
def random_head(target_only_pair):
    """An untrained head for the tiny target: its drafts are mostly rejected, so the residual
    distribution carries many tokens."""
    torch.manual_seed(3)
    target = target_only_pair.target
    return EagleHead(head_config(target.config), target).eval()


def greedy_alone(pair, prompt: str, budget: int) -> list[int]:
    config = GenerationConfig(prompt=prompt, temperature=0.0, max_new_tokens=budget)
    return run_target_only(pair, config)[1].token_ids


# ---- greedy: the target's own tokens ------------------------------------------------------


@pytest.mark.parametrize("k", [1, 4, 7])
def test_greedy_with_the_shipped_head_equals_target_greedy_decoding(shipped, k):
    pair, head = shipped
    held_out = json.loads((MODELS / "heldout_prompts.json").read_text())
    prompts = [domain[0][:120] for domain in held_out.values()]
    accepted = trials = 0
    for prompt in prompts:
        config = GenerationConfig(prompt=prompt, k=k, temperature=0.0, max_new_tokens=48)
        events = list(speculate(pair, config, drafter=DrafterSpec.eagle(head)))
        assert events[-1].token_ids == greedy_alone(pair, prompt, 48), prompt
        cycles = [e for e in events if isinstance(e, CycleEvent)]
        assert {c.drafter for c in cycles} == {"eagle"}
        assert all(len(c.draft_step_ms) == min(k, 48) or c is cycles[-1] for c in cycles)
        accepted += sum(c.n_accepted for c in cycles)
        trials += sum(c.n_accepted + c.rejected for c in cycles)
    assert accepted / trials > 0.3  # a trained head: mostly accepted, not chance (1/4096)


def test_greedy_rows_of_a_batch_with_the_head_equal_target_greedy_decoding(shipped):
    """Rows of 1 to many prompt tokens (the one-token row has nothing to draft from at first),
    budgets that retire rows at different steps, and k changing to and from 0 (the head then
    catches up on several verified steps in one pass)."""
    pair, head = shipped
    prompts = [PROMPT, *COMPANIONS]
    budgets = [40, 3, 23, 9, 31]
    for k in (4, [3, 0, 0, 5, 1, 0, 2, 0, 4]):
        config = BatchConfig(prompts, k=k, temperature=0.0, max_new_tokens=budgets)
        _, done = run_batch(pair, config, DrafterSpec.eagle(head))
        for prompt, budget, tokens in zip(prompts, budgets, done.token_ids, strict=True):
            assert tokens == greedy_alone(pair, prompt, budget), (k, prompt)
        assert done.alpha_counted > 0.2


def test_a_one_token_prompt_first_proposes_nothing_then_drafts(shipped):
    pair, head = shipped
    prompt = "a"
    config = GenerationConfig(prompt=prompt, k=3, temperature=0.0, max_new_tokens=12)
    assert len(encode_prompt(pair, config)) == 1
    events = list(speculate(pair, config, drafter=DrafterSpec.eagle(head)))
    cycles = [e for e in events if isinstance(e, CycleEvent)]
    assert cycles[0].n_proposed == 0 and cycles[0].draft_step_ms == []
    assert all(c.n_proposed == 3 for c in cycles[1:])
    assert events[-1].token_ids == greedy_alone(pair, prompt, 12)


# ---- sampled: distributed as the target ---------------------------------------------------


def test_sampled_tokens_with_the_shipped_head_are_distributed_as_the_target(shipped):
    pair, head = shipped
    first, second = token_counts(pair, PROMPT, runs=2000, drafter=DrafterSpec.eagle(head))
    p1, p2 = target_marginals(pair, PROMPT)
    assert chi_square_pvalue(first, p1) > 1e-3
    assert chi_square_pvalue(second, p2) > 1e-3
    assert chi_square_pvalue(first, target_marginals(pair, PROMPT, 0.7)[0]) < 1e-6


def test_sampled_tokens_with_a_mostly_rejected_head_are_distributed_as_the_target(
        target_only_pair, random_head):
    first, second = token_counts(target_only_pair, PROMPT, runs=2000,
                                 drafter=DrafterSpec.eagle(random_head))
    p1, p2 = target_marginals(target_only_pair, PROMPT)
    assert chi_square_pvalue(first, p1) > 1e-3
    assert chi_square_pvalue(second, p2) > 1e-3


def test_the_harness_rejects_the_heads_proposals_under_a_broken_rule(
        target_only_pair, random_head, monkeypatch):
    """After a rejection, drawing from p instead of norm(max(0, p - q)): the first token's
    chi-square fails with the head's proposals as it does with the draft model's."""

    def resampling_from_p(draft_tokens, q, p, lengths, uniforms):
        n, token = verify_batch(draft_tokens, q, p, lengths, uniforms)
        u_next = uniforms.gather(1, lengths[:, None])[:, 0]
        from_p = sample_with(p[torch.arange(len(n)), n], u_next)
        return n, torch.where(n < lengths, from_p, token)

    monkeypatch.setattr(step_module, "verify_batch", resampling_from_p)
    first, _ = token_counts(target_only_pair, PROMPT, runs=2000,
                            drafter=DrafterSpec.eagle(random_head))
    assert chi_square_pvalue(first, target_marginals(target_only_pair, PROMPT)[0]) < 1e-6


# ---- a row does not depend on its companions ----------------------------------------------


@pytest.mark.parametrize("k", [3, [2, 0, 4, 0, 0, 1]])
def test_a_rows_tokens_do_not_depend_on_its_companions(shipped, k):
    pair, head = shipped
    pair = dataclasses.replace(pair, stop_token_ids=frozenset())  # every row runs its budget
    settings = dict(temperature=0.8, top_k=50, top_p=0.95)
    drafter = DrafterSpec.eagle(head)

    def row_in(companions: list[tuple[str, int, int]], seed: int = 7) -> list[int]:
        rows = companions[: len(companions) // 2] + [(PROMPT, 40, seed)]
        rows += companions[len(companions) // 2 :]
        prompts, budgets, seeds = (list(x) for x in zip(*rows, strict=True))
        config = BatchConfig(prompts, k=k, max_new_tokens=budgets, seeds=seeds, **settings)
        return run_batch(pair, config, drafter)[1].token_ids[len(companions) // 2]

    by_itself = row_in([])
    assert len(by_itself) == 40
    assert row_in([(c, 5 + 7 * i, i) for i, c in enumerate(COMPANIONS)]) == by_itself
    assert row_in([(COMPANIONS[1], 3, 99), (PROMPT, 60, 8)]) == by_itself
    assert row_in([], seed=8) != by_itself  # the seed does matter
    if isinstance(k, int):  # one k throughout: the single stream draws the same
        config = GenerationConfig(prompt=PROMPT, k=k, max_new_tokens=40, seed=7, **settings)
        assert list(speculate(pair, config, drafter=drafter))[-1].token_ids == by_itself


# ---- p and q against fresh passes ---------------------------------------------------------


@torch.inference_mode()
def fresh_q(head, target, context: list[int], drafts: list[int]) -> torch.Tensor:
    """The head's logits ``[m, V]`` for each draft from a fresh cache: entries
    ``(x_{t+1}, f_t)`` over the whole context (the target's features from transformers' own
    pass), then its own features along the drafts."""
    ids = torch.tensor([context])
    features = target_features(target, ids[:, :-1])
    n = len(context) - 1
    cache = head.new_cache(1, n + len(drafts) + 1)
    feature = head(ids[:, 1:], features, torch.arange(n)[None], cache)[:, -1:]
    logits = []
    for i in range(len(drafts)):
        if i:
            feature = head(torch.tensor([[drafts[i - 1]]]), feature,
                           torch.tensor([[n - 1 + i]]), cache)
        logits.append(head.logits(feature[0, 0]))
    return torch.stack(logits)


def test_each_rows_p_and_q_equal_fresh_passes(shipped):
    """p and q of every row's every cycle, after rollbacks, plain steps (k = 0) and retired
    rows, equal the same warp over fresh passes of the row's own sequence."""
    pair, head = shipped
    settings = dict(temperature=0.9, top_k=40)
    prompts = [PROMPT, *COMPANIONS]
    seen = {"rows": set(), "full": 0, "rejection": 0}
    vocab = pair.shared_vocab_size

    def check(row, context, drafts, q, p, n):
        k = len(drafts)
        with torch.inference_mode():
            target_logits = forward(pair.target, new_cache(pair.target),
                                    torch.tensor([context + drafts]), keep=k + 1)[:, :vocab]
        torch.testing.assert_close(p, warp(target_logits, **settings), atol=1e-5, rtol=1e-4)
        if k:
            expected = warp(fresh_q(head, pair.target, context, drafts)[:, :vocab], **settings)
            torch.testing.assert_close(q, expected, atol=1e-5, rtol=1e-4)
        seen["rows"].add(row)
        seen["full" if n == k else "rejection"] += 1

    pair = dataclasses.replace(pair, stop_token_ids=frozenset())
    config = BatchConfig(prompts, k=[4, 0, 0, 3, 5, 0, 2], max_new_tokens=[30, 8, 25, 14, 20],
                         **settings)
    events = list(batched.speculate_batch(pair, config, on_verify=check,
                                          drafter=DrafterSpec.eagle(head)))
    assert seen["rows"] == set(range(5)) and seen["full"] >= 3 and seen["rejection"] >= 3
    assert [len(d) for d in events[-1].token_ids] == [30, 8, 25, 14, 20]


def test_one_drafter_at_a_time(shipped):
    """A record naming both prompt lookup's bounds and an EAGLE head names no drafter."""
    from engine.decoder.drafter_spec import spec_for
    from engine.decoder.ngram import PromptLookup

    pair, _ = shipped
    with pytest.raises(ValueError, match="one drafter at a time"):
        spec_for(pair, PromptLookup(), str(MODELS / "eagle"))


def test_the_eagle_drafter_needs_its_head(shipped):
    pair, _ = shipped
    with pytest.raises(ValueError, match="needs a head"):
        speculate(pair, GenerationConfig(prompt=PROMPT), drafter=DrafterSpec("eagle"))


def test_a_head_for_another_target_is_refused(target_only_pair):
    with pytest.raises(ValueError, match="another target"):
        load_head_for(target_only_pair, MODELS / "eagle")
