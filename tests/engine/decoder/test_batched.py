"""Batched speculative decoding: every row decodes as it would alone.

(a) greedy: each row's tokens equal that row decoded alone, with mixed prompt lengths and
    rows stopping at different steps; a batched pass's logits differ from a single row's by
    about 1e-6, so a token may differ only where the target's top-2 margin is under 1e-4.
(b) sampled: the first two tokens of a row inside a batch of mixed rows follow the target's
    own distribution (chi-square; the same harness rejects a broken rule and a nearby
    distribution).
(c) a row's tokens with a given seed are the same whatever rows decode beside it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from scipy.stats import chisquare
from support.runs import run_batch
from support.tiny_models import CORPUS, build_mistral, build_tokenizer, save

import engine.decoder.batched as batched
import engine.decoder.step as step_module
from engine.decoder.baseline import run_target_only
from engine.decoder.batched import BatchConfig, BatchDoneEvent, BatchStepEvent
from engine.decoder.common import encode_prompt
from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.events import GenerationConfig
from engine.decoder.forward import forward, new_cache
from engine.decoder.loading import load_pair
from engine.decoder.ngram import PromptLookup
from engine.decoder.sampling import sample_with, warp
from engine.decoder.speculative import speculate
from engine.decoder.verify import verify_batch

PROMPT = "the quick brown fox"
# Mixed lengths: 1 token, a few, many.
COMPANIONS = [
    "the",
    "speculative decoding drafts tokens with a small model and verifies them with a large one",
    "héllo wörld, ça va?",
    "the cat sat on the mat and the lazy dog",
]


def alone(pair, prompt: str, k: int, **settings) -> list[int]:
    """The row decoded by the single stream (target-only when k = 0)."""
    config = GenerationConfig(prompt=prompt, k=max(k, 1), **settings)
    if k == 0:
        return run_target_only(pair, config)[1].token_ids
    return list(speculate(pair, config))[-1].token_ids


@torch.inference_mode()
def top2_margin(pair, prompt: str, tokens: list[int]) -> float:
    """The target's top-2 logit margin after ``prompt`` and ``tokens`` (transformers'
    own forward pass over the whole sequence)."""
    ids = encode_prompt(pair, GenerationConfig(prompt=prompt)) + tokens
    logits = pair.target(input_ids=torch.tensor([ids], device=pair.device)).logits[0, -1]
    top = logits[: pair.shared_vocab_size].float().topk(2).values
    return float(top[0] - top[1])


def assert_same_or_near_tie(pair, prompt: str, solo: list[int], together: list[int]) -> bool:
    """``together`` equals ``solo``, or first differs where the target is within 1e-4 of a
    tie (rounding may pick either); True when they are equal."""
    if together == solo:
        return True
    i = next((j for j, (a, b) in enumerate(zip(solo, together, strict=False)) if a != b), None)
    assert i is not None, f"one output is a prefix of the other: {solo} vs {together}"
    margin = top2_margin(pair, prompt, solo[:i])
    assert margin < 1e-4, (
        f"token {i} differs ({solo[i]} alone, {together[i]} in the batch) where the "
        f"target's top-2 margin is {margin:.2e}, not a rounding tie"
    )
    return False


# ---- (a) greedy: each row as alone --------------------------------------------------------


@pytest.mark.parametrize("draft", ["good_pair", "bad_pair", "wide_pair"])
@pytest.mark.parametrize("k", [0, 1, 3, 6])
def test_greedy_rows_equal_each_row_decoded_alone(request, draft, k):
    """Rows of 1 to 16 prompt tokens with budgets of 1 to 40 tokens, and an end-of-sequence
    token that stops some rows early: the batch shrinks step by step."""
    pair = request.getfixturevalue(draft)
    prompts = [PROMPT, *COMPANIONS]
    budgets = [40, 1, 23, 9, 31]
    probe = alone(pair, prompts[0], k, temperature=0.0, max_new_tokens=40)
    pair = dataclasses.replace(pair, stop_token_ids=frozenset({probe[12]}))
    config = BatchConfig(prompts, k=k, temperature=0.0, max_new_tokens=budgets)
    steps, done = run_batch(pair, config)
    equal = 0
    for prompt, budget, tokens in zip(prompts, budgets, done.token_ids, strict=True):
        solo = alone(pair, prompt, k, temperature=0.0, max_new_tokens=budget)
        equal += assert_same_or_near_tie(pair, prompt, solo, tokens)
    assert equal >= len(prompts) - 1  # a tie is rare: not every row may hit one
    assert "eos" in done.stop_reasons and "length" in done.stop_reasons
    sizes = [len(s.rows) for s in steps]
    assert sizes[0] == 5 and sizes == sorted(sizes, reverse=True) and len(set(sizes)) >= 3


def test_greedy_rows_with_k_changing_to_and_from_zero(good_pair):
    """k per step, to and from 0: after plain steps the draft catches up on what it missed
    in one ragged pass. Each row still equals target-only greedy decoding."""
    prompts = [PROMPT, *COMPANIONS]
    schedule = [3, 0, 0, 5, 1, 0, 2, 0, 0, 0, 4]
    _, done = run_batch(good_pair, BatchConfig(prompts, k=schedule, temperature=0.0,
                                               max_new_tokens=36))
    for prompt, tokens in zip(prompts, done.token_ids, strict=True):
        assert_same_or_near_tie(good_pair, prompt, alone(good_pair, prompt, 0, temperature=0.0,
                                                         max_new_tokens=36), tokens)


def test_greedy_shipped_pair_rows_equal_rows_alone():
    """The shipped pair (a 4096-token vocabulary, eight layers): held-out prompts of
    different lengths, together and one by one."""
    models = Path(__file__).parents[3] / "models"
    pair = load_pair(str(models / "target"), str(models / "draft"), device="cpu")
    held_out = json.loads((models / "heldout_prompts.json").read_text())
    prompts = [text[: 40 + 37 * i] for i, text in enumerate(
        [p for domain in held_out.values() for p in domain[:2]][:6])]
    _, done = run_batch(pair, BatchConfig(prompts, k=4, temperature=0.0, max_new_tokens=24))
    for prompt, tokens in zip(prompts, done.token_ids, strict=True):
        solo = alone(pair, prompt, 4, temperature=0.0, max_new_tokens=24)
        assert_same_or_near_tie(pair, prompt, solo, tokens)
    assert done.alpha_counted > 0.3  # a related pair: the drafts were mostly accepted


# ---- (b) sampled: distributed as the target ---------------------------------------------


def first_two_counts(pair, copies: int, batches: int, k: int = 3) -> torch.Tensor:
    """``[2, V]``: how often each id came first and second from rows of ``PROMPT`` (seeds
    all different) decoded in batches where they sit between rows of other prompts, lengths
    and budgets (temperature 1)."""
    pair = dataclasses.replace(pair, stop_token_ids=frozenset())  # an end token is a token
    counts = torch.zeros(2, pair.shared_vocab_size)
    for batch in range(batches):
        prompts, budgets, mine = [], [], []
        for i in range(copies):
            mine.append(len(prompts))
            prompts.append(PROMPT)
            budgets.append(2)
            companion = COMPANIONS[i % len(COMPANIONS)]
            prompts.append(companion)
            budgets.append(1 + i % 5)
        seeds = [batch * len(prompts) + i for i in range(len(prompts))]
        config = BatchConfig(prompts, k=k, temperature=1.0, max_new_tokens=budgets, seeds=seeds)
        _, done = run_batch(pair, config)
        for row in mine:
            first, second = done.token_ids[row]
            counts[0, first] += 1
            counts[1, second] += 1
    return counts


@torch.inference_mode()
def target_marginals(pair, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's own ``p(x1)`` and ``p(x2) = sum_x1 p(x1) p(x2 | x1)`` after ``PROMPT``,
    in float64, from transformers' forward pass (every x1 in one batch)."""
    vocab = pair.shared_vocab_size
    ids = torch.tensor([encode_prompt(pair, GenerationConfig(prompt=PROMPT))])
    p1 = (pair.target(input_ids=ids).logits[0, -1, :vocab].double() / temperature).softmax(-1)
    both = torch.cat([ids.expand(vocab, -1), torch.arange(vocab)[:, None]], dim=1)
    given = (pair.target(input_ids=both).logits[:, -1, :vocab].double() / temperature
             ).softmax(-1)
    return p1, p1 @ given


def chi_square_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Ids expected fewer than 5 times are pooled into one cell, as chi-square needs."""
    expected = probs * counts.sum()
    small = expected < 5
    observed = torch.cat([counts[~small], counts[small].sum(0, keepdim=True)])
    expected = torch.cat([expected[~small], expected[small].sum(0, keepdim=True)])
    return chisquare(observed.numpy(), expected.numpy()).pvalue


@pytest.mark.parametrize("draft", ["good_pair", "bad_pair"])
def test_sampled_rows_in_a_mixed_batch_are_distributed_as_the_target(request, draft):
    """2000 rows: a draft that is mostly accepted and one that is mostly rejected (so the
    bonus token and the residual both carry the second token)."""
    pair = request.getfixturevalue(draft)
    counts = first_two_counts(pair, copies=50, batches=40)
    p1, p2 = target_marginals(pair)
    assert chi_square_pvalue(counts[0], p1) > 1e-3
    assert chi_square_pvalue(counts[1], p2) > 1e-3
    # The same counts tell a nearby distribution apart: the target's at temperature 0.7.
    assert chi_square_pvalue(counts[0], target_marginals(pair, 0.7)[0]) < 1e-6


def test_the_harness_rejects_a_batch_with_a_broken_rule(bad_pair, monkeypatch):
    """The classic bug (after a rejection, draw from p instead of norm(max(0, p - q))),
    put into the batched loop: the second token's chi-square fails."""

    def resampling_from_p(draft_tokens, q, p, lengths, uniforms):
        n, token = verify_batch(draft_tokens, q, p, lengths, uniforms)
        u_next = uniforms.gather(1, lengths[:, None])[:, 0]
        from_p = sample_with(p[torch.arange(len(n)), n], u_next)
        return n, torch.where(n < lengths, from_p, token)

    monkeypatch.setattr(step_module, "verify_batch", resampling_from_p)
    counts = first_two_counts(bad_pair, copies=50, batches=40, k=1)
    assert chi_square_pvalue(counts[0], target_marginals(bad_pair)[0]) < 1e-6


# ---- (c) a row does not depend on its companions ---------------------------------------


@pytest.mark.parametrize("k", [0, 3, [2, 0, 4, 0, 0, 1]])
def test_a_rows_tokens_do_not_depend_on_its_companions(good_pair, k):
    settings = dict(temperature=0.8, top_k=50, top_p=0.95)
    mine = dict(prompt=PROMPT, budget=40, seed=7)

    def row_in(companions: list[tuple[str, int, int]], seed: int = mine["seed"]) -> list[int]:
        rows = companions[: len(companions) // 2] + [(mine["prompt"], mine["budget"], seed)]
        rows += companions[len(companions) // 2 :]
        prompts, budgets, seeds = (list(x) for x in zip(*rows, strict=True))
        config = BatchConfig(prompts, k=k, max_new_tokens=budgets, seeds=seeds, **settings)
        return run_batch(good_pair, config)[1].token_ids[len(companions) // 2]

    by_itself = row_in([])
    assert len(by_itself) == 40
    assert row_in([(c, 5 + 7 * i, i) for i, c in enumerate(COMPANIONS)]) == by_itself
    assert row_in([(COMPANIONS[1], 3, 99), (PROMPT, 60, 8)]) == by_itself
    assert row_in([(c, 40, 7) for c in COMPANIONS[:2]] * 3) == by_itself
    assert row_in([], seed=8) != by_itself  # the seed does matter
    if isinstance(k, int):  # one k throughout: the single stream draws the same
        assert alone(good_pair, PROMPT, k, max_new_tokens=40, seed=7, **settings) == by_itself


# ---- the caches: per-row rollback and catch-up ------------------------------------------


def from_scratch(model, ids: list[int], keep: int) -> torch.Tensor:
    with torch.inference_mode():
        return forward(model, new_cache(model), torch.tensor([ids]), keep=keep)


def test_each_rows_p_and_q_equal_from_scratch_passes(good_pair):
    """p and q of every row's every cycle, as the batch computed them over caches rolled
    back row by row, fed one, two or more tokens, with rows retired, equal the same warp
    over fresh forward passes of that row's own sequence."""
    pair, settings = good_pair, dict(temperature=0.9, top_k=40)
    prompts = [PROMPT, *COMPANIONS]
    seen = {"rows": set(), "full": 0, "rejection": 0}

    def check(row, context, drafts, q, p, n):
        k, v = len(drafts), pair.shared_vocab_size
        logits = from_scratch(pair.target, context + drafts, k + 1)[:, :v]
        torch.testing.assert_close(p, warp(logits, **settings), atol=1e-5, rtol=1e-4)
        for i in range(k):
            q_i = from_scratch(pair.draft, context + drafts[:i], 1)[-1, :v]
            torch.testing.assert_close(q[i], warp(q_i, **settings), atol=1e-5, rtol=1e-4)
        seen["rows"].add(row)
        seen["full" if n == k else "rejection"] += 1

    config = BatchConfig(prompts, k=[4, 0, 0, 3, 5, 0, 2], max_new_tokens=[30, 8, 25, 14, 20],
                         **settings)
    events = list(batched.speculate_batch(pair, config, on_verify=check))
    assert seen["rows"] == set(range(5)) and seen["full"] >= 3 and seen["rejection"] >= 3
    assert [len(d) for d in events[-1].token_ids] == [30, 8, 25, 14, 20]


# ---- events, schedules, stopping ---------------------------------------------------------


def test_events_follow_the_schedule_and_the_live_rows(good_pair):
    """k as a function of the live batch size; rows leave when their budget is spent; the
    events account for every token."""
    schedule = {5: 0, 4: 1, 3: 2, 2: 3, 1: 4}
    prompts = [PROMPT, *COMPANIONS]
    budgets = [3, 9, 17, 26, 40]
    config = BatchConfig(prompts, k=schedule.__getitem__, temperature=0.0,
                         max_new_tokens=budgets)
    steps, done = run_batch(good_pair, config)
    assert isinstance(done, BatchDoneEvent) and all(isinstance(s, BatchStepEvent) for s in steps)
    assert [s.index for s in steps] == list(range(len(steps))) == list(range(done.steps))
    for step in steps:
        assert step.k == schedule[len(step.rows)]
        assert len(step.n_accepted) == len(step.n_emitted) == len(step.rows)
        assert all(0 <= n <= step.k for n in step.n_accepted)
        assert step.step_ms >= step.draft_ms + step.verify_ms - 1e-6
        json.dumps(dataclasses.asdict(step))
    assert {len(s.rows) for s in steps} == {5, 4, 3, 2, 1}
    for row, budget in enumerate(budgets):
        emitted = sum(s.n_emitted[s.rows.index(row)] for s in steps if row in s.rows)
        assert emitted == budget == len(done.token_ids[row])
    assert done.tokens == sum(budgets) and done.stop_reasons == ["length"] * 5
    assert done.trials >= done.accepted > 0 and done.drafted >= done.trials
    assert done.texts[4] == good_pair.tokenizer.decode(done.token_ids[4],
                                                       skip_special_tokens=True)
    json.dumps(dataclasses.asdict(done))


def test_k_zero_throughout_needs_no_draft(target_only_pair, good_pair):
    config = BatchConfig([PROMPT, *COMPANIONS], k=0, temperature=0.7, max_new_tokens=12,
                         seeds=[3, 4, 5, 6, 7])
    _, done = run_batch(target_only_pair, config)
    assert done.token_ids == run_batch(good_pair, config)[1].token_ids
    assert done.accepted == done.trials == done.drafted == 0


# ---- refusals ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def windowed_pair(tmp_path_factory):
    """A sliding-window Mistral: only transformers' forward pass runs it."""
    root = tmp_path_factory.mktemp("windowed")
    tokenizer = build_tokenizer(CORPUS)
    target = save(root, "target", build_mistral(seed=0, sliding_window=8), tokenizer)
    draft = save(root, "draft", build_mistral(seed=1, sliding_window=8), tokenizer)
    return load_pair(target, draft, device="cpu")


def test_models_only_transformers_runs_decode_one_row_only(windowed_pair):
    with pytest.raises(ValueError, match="keeps one length for all rows"):
        batched.speculate_batch(windowed_pair, BatchConfig([PROMPT, "the"], k=2))
    config = BatchConfig([PROMPT], k=2, temperature=0.8, max_new_tokens=20, seeds=3)
    tokens = run_batch(windowed_pair, config)[1].token_ids[0]
    assert tokens == alone(windowed_pair, PROMPT, 2, max_new_tokens=20, seed=3)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(prompts=[]), "at least one prompt"),
        (dict(k=-1), "k \\(draft tokens per step\\) must be an integer 0..32"),
        (dict(k=[2, 40]), "k \\(draft tokens per step\\)"),
        (dict(k=[]), "empty list"),
        (dict(k=lambda live: 2.5), "the schedule's k at batch size 1"),
        (dict(max_new_tokens=[4]), "max new tokens lists 1 values for 2 prompts"),
        (dict(seeds=[1, 2, 3]), "seeds lists 3 values for 2 prompts"),
        (dict(prompts=[PROMPT, " "]), "prompt is empty"),
        (dict(max_new_tokens=[4, 0]), "max new tokens must be"),
        (dict(temperature=-1.0), "temperature"),
    ],
)
def test_bad_settings_raise_clear_errors_before_running(good_pair, settings, message):
    config = BatchConfig(**{"prompts": [PROMPT, "the"], **settings})
    with pytest.raises(ValueError, match=message):
        batched.speculate_batch(good_pair, config)


def test_speculation_needs_a_draft(target_only_pair):
    with pytest.raises(ValueError, match="needs a draft"):
        batched.speculate_batch(target_only_pair, BatchConfig([PROMPT, "the"], k=2))


# ---- prompt lookup: each row proposes 0..k tokens of its own -----------------------------

# Rows whose contexts repeat themselves (so the lookup proposes) beside rows that never do.
LOOKUP_PROMPTS = [
    "the cat sat on the mat and the cat",
    "the",
    "abc abc abc abc abc abc",
    "speculative decoding drafts tokens with a small model and verifies them with a large one",
    "the quick brown fox and the quick brown",
]


def alone_lookup(pair, prompt: str, k: int, **settings) -> list[int]:
    """The row decoded by the single stream with prompt lookup as its drafter."""
    config = GenerationConfig(prompt=prompt, k=k, **settings)
    return list(speculate(pair, config, drafter=DrafterSpec.ngram(PromptLookup())))[-1].token_ids


@pytest.mark.parametrize("k", [1, 3, 6])
def test_lookup_greedy_rows_equal_each_row_decoded_alone(target_only_pair, k):
    """No draft model at all; rows of different lengths, budgets and proposal sizes (0..k a
    step, per row), and an end-of-sequence token stopping some rows early."""
    pair = target_only_pair
    budgets = [40, 1, 23, 9, 31]
    probe = alone_lookup(pair, LOOKUP_PROMPTS[0], k, temperature=0.0, max_new_tokens=40)
    pair = dataclasses.replace(pair, stop_token_ids=frozenset({probe[12]}))
    sizes_seen: set[int] = set()

    def seen(row, context, drafts, q, p, n):
        sizes_seen.add(len(drafts))
        assert q.shape == (len(drafts), pair.shared_vocab_size) and p.shape[0] == len(drafts) + 1

    config = BatchConfig(LOOKUP_PROMPTS, k=k, temperature=0.0, max_new_tokens=budgets)
    steps = list(batched.speculate_batch(pair, config, on_verify=seen,
                                         drafter=DrafterSpec.ngram()))
    done = steps.pop()
    equal = 0
    for prompt, budget, tokens in zip(LOOKUP_PROMPTS, budgets, done.token_ids, strict=True):
        solo = alone_lookup(pair, prompt, k, temperature=0.0, max_new_tokens=budget)
        equal += assert_same_or_near_tie(pair, prompt, solo, tokens)
    assert equal >= len(LOOKUP_PROMPTS) - 1
    assert 0 in sizes_seen and k in sizes_seen  # ragged: rows with nothing and with k drafts
    assert done.drafted > 0 and done.trials >= done.accepted > 0
    assert "eos" in done.stop_reasons and "length" in done.stop_reasons
    assert len({len(s.rows) for s in steps}) >= 3


def test_lookup_rows_equal_the_single_stream_whatever_their_companions(good_pair):
    """Sampled (temperature 0.8, top-k, top-p): a row's tokens with its seed are those of the
    single stream's lookup run, alone or among other rows, and depend on the seed."""
    settings = dict(temperature=0.8, top_k=50, top_p=0.95)
    prompt = LOOKUP_PROMPTS[2]

    def row_in(companions: list[str], seed: int = 7) -> list[int]:
        prompts = companions[:1] + [prompt] + companions[1:]
        seeds = [100 + i for i in range(len(prompts))]
        seeds[min(1, len(companions))] = seed
        config = BatchConfig(prompts, k=4, max_new_tokens=40, seeds=seeds, **settings)
        return run_batch(good_pair, config, drafter=DrafterSpec.ngram(PromptLookup()))[1].token_ids[
            min(1, len(companions))]

    by_itself = row_in([])
    assert len(by_itself) == 40
    assert alone_lookup(good_pair, prompt, 4, max_new_tokens=40, seed=7, **settings) == by_itself
    assert row_in(LOOKUP_PROMPTS[:2] + LOOKUP_PROMPTS[3:]) == by_itself
    assert row_in([LOOKUP_PROMPTS[0], prompt, LOOKUP_PROMPTS[1]]) == by_itself
    assert row_in([], seed=8) != by_itself


def lookup_first_two_counts(pair, prompt: str, copies: int, batches: int,
                            k: int = 3) -> torch.Tensor:
    """``[2, V]``: first and second tokens of rows of ``prompt`` drafted by prompt lookup,
    each between rows of other prompts, lengths and budgets (temperature 1)."""
    pair = dataclasses.replace(pair, stop_token_ids=frozenset())
    counts = torch.zeros(2, pair.shared_vocab_size)
    for batch in range(batches):
        prompts, budgets, mine = [], [], []
        for i in range(copies):
            mine.append(len(prompts))
            prompts += [prompt, LOOKUP_PROMPTS[1 + i % 4]]
            budgets += [2, 1 + i % 5]
        seeds = [batch * len(prompts) + i for i in range(len(prompts))]
        config = BatchConfig(prompts, k=k, temperature=1.0, max_new_tokens=budgets, seeds=seeds)
        _, done = run_batch(pair, config, drafter=DrafterSpec.ngram(PromptLookup()))
        assert done.drafted > 0  # the lookup did propose: the rule, not plain steps, ran
        for row in mine:
            first, second = done.token_ids[row]
            counts[0, first] += 1
            counts[1, second] += 1
    return counts


@torch.inference_mode()
def marginals_after(pair, prompt: str, temperature: float = 1.0):
    """``p(x1)`` and ``p(x2)`` after ``prompt`` (as :func:`target_marginals`)."""
    vocab = pair.shared_vocab_size
    ids = torch.tensor([encode_prompt(pair, GenerationConfig(prompt=prompt))])
    p1 = (pair.target(input_ids=ids).logits[0, -1, :vocab].double() / temperature).softmax(-1)
    both = torch.cat([ids.expand(vocab, -1), torch.arange(vocab)[:, None]], dim=1)
    given = (pair.target(input_ids=both).logits[:, -1, :vocab].double() / temperature
             ).softmax(-1)
    return p1, p1 @ given


def test_lookup_sampled_rows_in_a_mixed_batch_are_distributed_as_the_target(target_only_pair):
    """2000 rows of a prompt whose end repeats an earlier n-gram, so every row's first cycle
    verifies a proposal: the one-hot q's residual carries the rejections."""
    prompt = LOOKUP_PROMPTS[0]
    counts = lookup_first_two_counts(target_only_pair, prompt, copies=50, batches=40)
    p1, p2 = marginals_after(target_only_pair, prompt)
    assert chi_square_pvalue(counts[0], p1) > 1e-3
    assert chi_square_pvalue(counts[1], p2) > 1e-3
    assert chi_square_pvalue(counts[0], marginals_after(target_only_pair, prompt, 0.7)[0]) < 1e-6


def test_the_harness_rejects_a_lookup_batch_with_a_broken_rule(target_only_pair, monkeypatch):
    """The acceptance ratio upside down (accept x when u < q(x) / p(x)): with a one-hot q
    every proposal is accepted, and the first token's chi-square fails. (Resampling from p
    after a rejection would not show here: the tiny target's p is too flat for the rejected
    token's p(x)^2 to be seen in 2000 rows.)"""

    def upside_down(draft_tokens, q, p, lengths, uniforms):
        assert q is None  # prompt lookup's proposals are one-hot: q(x) = 1
        p_x = p[:, :-1].gather(-1, draft_tokens[..., None]).squeeze(-1)
        proposed = torch.arange(draft_tokens.shape[1]) < lengths[:, None]
        accepted = (uniforms[:, :-1] < 1.0 / p_x) & proposed  # u < q/p: always, as p <= 1
        n = accepted.long().cumprod(dim=1).sum(dim=1)
        u_next = uniforms.gather(1, lengths[:, None])[:, 0]
        return n, sample_with(p[torch.arange(len(n)), n], u_next)

    monkeypatch.setattr(step_module, "verify_batch", upside_down)
    prompt = LOOKUP_PROMPTS[0]
    counts = lookup_first_two_counts(target_only_pair, prompt, copies=50, batches=40, k=1)
    assert chi_square_pvalue(counts[0], marginals_after(target_only_pair, prompt)[0]) < 1e-6
