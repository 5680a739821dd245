"""Token trees: the one-pass verification sees exactly each branch's own prefix, the accepted
path's cache is the chain's, greedy output is the target's own, and both rules are lossless by
chi-square, with a broken-rule control each test must catch."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import torch
from support.lossless import chi_square_pvalue, target_marginals

import engine.decoder.tree_speculative as tree_module
from engine.analytic import trees
from engine.analytic.trees import MEDUSA_TREE
from engine.decoder import stats
from engine.decoder.baseline import run_target_only
from engine.decoder.common import encode_prompt
from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.events import DoneEvent, GenerationConfig
from engine.decoder.forward import KVCache
from engine.decoder.loading import load_pair
from engine.decoder.medusa import MedusaHeads, load_heads_for
from engine.decoder.speculative import speculate
from engine.decoder.tree import (
    DISTINCT,
    IID,
    TOP,
    Tree,
    keep_path,
    static_paths,
    tree_decoder,
    tree_of,
    tree_pass,
    verify,
)
from engine.decoder.tree_speculative import TreeCycle, speculate_tree

MODELS = Path(__file__).parents[3] / "models"
PROMPT = "the quick brown fox"


@pytest.fixture(scope="module")
def shipped():
    pair = load_pair(str(MODELS / "target"), None, device="cpu")
    return pair, load_heads_for(pair, MODELS / "medusa")


@pytest.fixture(scope="module")
def random_heads(target_only_pair):
    torch.manual_seed(7)
    heads = MedusaHeads.for_target(target_only_pair.target, num_heads=3)
    for block in heads.blocks:
        for layer in block.layers:
            torch.nn.init.normal_(layer.weight, std=0.5)
    return heads.eval()


# ---- the tree itself ------------------------------------------------------------------------


def test_a_node_sees_itself_and_its_ancestors_only():
    tree = Tree((5, 6, 7, 8), (0, 0, 1, 3))  # root -> 1, 2; 1 -> 3 -> 4
    assert tree.depths() == [0, 1, 1, 2, 3]
    assert tree.children(0) == [1, 2] and tree.children(1) == [3]
    seen = tree.mask()
    assert seen[4].tolist() == [True, True, False, True, True]
    assert seen[2].tolist() == [True, False, True, False, False]
    with pytest.raises(ValueError, match="earlier node"):
        Tree((1,), (1,))


def test_static_paths_need_their_parents_and_elder_siblings():
    assert static_paths([(1,), (0,), (0, 0)]) == [(0,), (1,), (0, 0)]
    with pytest.raises(ValueError, match="parent path"):
        static_paths([(0,), (1, 0)])
    with pytest.raises(ValueError, match="elder sibling"):
        static_paths([(1,)])


# ---- one pass over the tree is every branch's own pass ----------------------------------------


@torch.inference_mode()
def test_each_nodes_logits_are_a_fresh_pass_over_its_own_branch(target_only_pair):
    pair = target_only_pair
    decoder = tree_decoder(pair)
    prompt = encode_prompt(pair, GenerationConfig(prompt=PROMPT))
    paths = static_paths([(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0)])
    gen = torch.Generator().manual_seed(0)
    tree = tree_of(paths, lambda path: int(torch.randint(3, 250, (), generator=gen)))
    cache = KVCache(decoder, 64)
    decoder(cache, torch.tensor([prompt[:-1]]), 1)
    logits = tree_pass(decoder, cache, prompt[-1], tree)
    for node, path in enumerate([(), *paths]):
        branch = [tree.tokens[paths.index(path[:i + 1])] for i in range(len(path))]
        fresh = pair.target(input_ids=torch.tensor([prompt + branch])).logits[0, -1]
        assert torch.allclose(logits[node], fresh, atol=1e-4), path


@torch.inference_mode()
def test_the_kept_path_leaves_the_cache_of_the_chain(target_only_pair):
    pair = target_only_pair
    decoder = tree_decoder(pair)
    prompt = encode_prompt(pair, GenerationConfig(prompt=PROMPT))
    tree = Tree((11, 12, 13, 14), (0, 0, 2, 3))
    cache = KVCache(decoder, 64)
    decoder(cache, torch.tensor([prompt[:-1]]), 1)
    start = cache.length
    tree_pass(decoder, cache, prompt[-1], tree)
    keep_path(cache, start, [2, 3])  # root -> 12 -> 13
    assert cache.length == start + 3
    after = decoder(cache, torch.tensor([[40]]), 1)[0, -1]
    fresh = pair.target(input_ids=torch.tensor([prompt + [12, 13, 40]])).logits[0, -1]
    assert torch.allclose(after, fresh, atol=1e-4)


# ---- greedy: the target's own tokens -------------------------------------------------------


@pytest.mark.parametrize("rule", [TOP, IID])
def test_greedy_tree_decoding_equals_the_target_alone(shipped, rule):
    pair, heads = shipped
    for prompt in ("And it came to pass, when the king heard these words, that",
                   "hack n. 1. Originally, a quick job that produces what is needed,", "a"):
        config = GenerationConfig(prompt=prompt, temperature=0.0, max_new_tokens=40)
        *cycles, done = speculate_tree(pair, config, heads, rule=rule)
        assert isinstance(done, DoneEvent) and all(isinstance(c, TreeCycle) for c in cycles)
        assert done.token_ids == run_target_only(pair, config)[1].token_ids, prompt
    assert sum(c.n_accepted for c in cycles) > 0


def test_a_tree_run_as_cycle_events_shows_what_the_target_alone_writes(shipped):
    """The drafter spec's tree through :func:`speculate`: every cycle a chain-view event with
    its tree, the accepted path first, the output the target's own; the summary prices the
    tree by the acceptance by rank its cycles measured."""
    pair, heads = shipped
    config = GenerationConfig(prompt="And it came to pass, when the king heard these words,",
                              temperature=0.0, max_new_tokens=40)
    drafter = DrafterSpec.medusa(heads, MEDUSA_TREE)
    *cycles, summary, done = speculate(pair, config, drafter=drafter,
                                       baseline_step_ms=[10.0] * 40)
    assert done.token_ids == run_target_only(pair, config)[1].token_ids
    assert "".join(c.text for c in cycles) == done.text
    for c in cycles:
        assert c.k == 4 and len(c.tree.nodes) == len(MEDUSA_TREE)
        kinds = [t.kind for t in c.tokens]
        assert kinds[: c.n_accepted] == ["accepted"] * c.n_accepted or c is cycles[-1]
        assert [t.text for t in c.tokens if t.kind == "accepted"] == [
            n.text for n in c.tree.nodes if n.kind == "accepted"]
    assert summary.tree == trees.text(MEDUSA_TREE)
    predicted_tokens = stats.tree_tokens(cycles)
    measured_tokens = sum(c.n_accepted + 1 for c in cycles) / len(cycles)
    assert predicted_tokens == pytest.approx(measured_tokens, rel=0.2)


def test_a_tree_is_a_heads_own_and_no_deeper_than_they_are(shipped):
    """Paths for the draft model and the Medusa heads, SGLang's numbers for the EAGLE head,
    nothing for prompt lookup."""
    pair, heads = shipped
    for wrong in (DrafterSpec("eagle", tree=((0,),)), DrafterSpec("ngram", tree=((0,),)),
                  DrafterSpec("medusa", head=heads, tree=trees.TreeShape(5, 4, 8))):
        with pytest.raises(ValueError, match="drafted by the draft model or the Medusa heads"):
            wrong.check(pair, 1)
    with pytest.raises(ValueError, match="the tree is 5 deep"):
        DrafterSpec.medusa(heads, trees.chain(5)).check(pair, 1)


def test_a_tree_accepts_more_a_cycle_than_the_heads_chain(shipped):
    """The first head's top three instead of its top one: the same target pass accepts more."""
    pair, heads = shipped
    config = GenerationConfig(prompt="And it came to pass, when the king heard these words,",
                              temperature=0.0, max_new_tokens=48)
    chain = [(0,), (0, 0), (0, 0, 0), (0, 0, 0, 0)]

    def mean_accepted(choices):
        *cycles, _ = speculate_tree(pair, config, heads, choices)
        return sum(c.n_accepted for c in cycles) / len(cycles)

    assert mean_accepted(MEDUSA_TREE) > mean_accepted(chain)


# ---- sampled: distributed as the target ------------------------------------------------------


def tree_counts(pair, heads, rule: str, runs: int = 2000) -> tuple[torch.Tensor, torch.Tensor]:
    pair = dataclasses.replace(pair, stop_token_ids=frozenset())
    counts = torch.zeros(2, pair.shared_vocab_size)
    choices = [(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]
    for seed in range(runs):
        config = GenerationConfig(prompt=PROMPT, temperature=1.0, max_new_tokens=2, seed=seed)
        first, second = list(speculate_tree(pair, config, heads, choices, rule))[-1].token_ids
        counts[0, first] += 1
        counts[1, second] += 1
    return counts[0], counts[1]


@pytest.mark.parametrize("rule", [TOP, IID, DISTINCT])
def test_sampled_tree_tokens_are_distributed_as_the_target(target_only_pair, random_heads,
                                                           rule):
    first, second = tree_counts(target_only_pair, random_heads, rule)
    p1, p2 = target_marginals(target_only_pair, PROMPT)
    assert chi_square_pvalue(first, p1) > 1e-3
    assert chi_square_pvalue(second, p2) > 1e-3


def test_the_iid_ratio_on_deterministic_children_is_caught(target_only_pair, random_heads,
                                                           monkeypatch):
    """Top-b children verified with SpecInfer's q-ratio, which assumes children drawn from q:
    lossy, and the harness says so."""

    def ratio_rule(tree, p, rule, uniforms, q=None):
        return verify(tree, p, IID, uniforms, q)

    monkeypatch.setattr(tree_module, "verify", ratio_rule)
    first, _ = tree_counts(target_only_pair, random_heads, TOP)
    assert chi_square_pvalue(first, target_marginals(target_only_pair, PROMPT)[0]) < 1e-6


def test_a_tree_is_refused_where_it_cannot_be_verified_in_one_pass(target_only_pair,
                                                                   random_heads):
    windowed = copy.copy(target_only_pair.target)
    windowed.config = copy.deepcopy(windowed.config)
    windowed.config.sliding_window = 8
    with pytest.raises(ValueError, match="sliding attention window"):
        speculate_tree(dataclasses.replace(target_only_pair, target=windowed),
                       GenerationConfig(prompt=PROMPT), random_heads, [(0,), (1,), (0, 0)])
    with pytest.raises(ValueError, match="4 deep; the Medusa heads guess 3 tokens at most"):
        speculate_tree(target_only_pair, GenerationConfig(prompt=PROMPT), random_heads,
                       [(0,), (0, 0), (0, 0, 0), (0, 0, 0, 0)])


def test_acceptance_by_rank_measured_on_one_tree_predicts_another(shipped):
    """The model of engine.analytic.trees, fed the rank acceptance counted on the default
    tree's cycles, predicts the tokens a cycle of the heads' chain, run separately."""
    import json

    from engine.analytic import trees
    from engine.decoder.tree_speculative import rank_acceptance

    pair, heads = shipped
    prompts = json.loads((MODELS / "heldout_prompts.json").read_text())["kjv"][:6]

    def cycles_of(choices):
        out = []
        for prompt in prompts:
            config = GenerationConfig(prompt=prompt[:160], temperature=0.0, max_new_tokens=40)
            *cycles, _ = speculate_tree(pair, config, heads, choices)
            out += cycles
        return out

    acc = rank_acceptance(cycles_of(MEDUSA_TREE), depth=4, ranks=4)
    chain = cycles_of(trees.chain(4))
    measured = sum(c.n_accepted + 1 for c in chain) / len(chain)
    assert trees.expected_tokens(trees.chain(4), acc) == pytest.approx(measured, rel=0.1)


@torch.inference_mode()
def test_rows_of_a_batch_verify_their_trees_as_each_would_alone(target_only_pair):
    """Rows of different lengths, the same tree shape, their own tokens: each row's logits
    are its single-stream tree pass's, and after keeping different paths each row's cache
    continues as its own chain does."""
    from engine.decoder.forward import RaggedCache
    from engine.decoder.tree import keep_paths, tree_pass_rows

    pair = target_only_pair
    decoder = tree_decoder(pair)
    prompts = [encode_prompt(pair, GenerationConfig(prompt=t))
               for t in (PROMPT, "the cat sat on the mat and the lazy dog", "héllo")]
    shape = Tree((0, 0, 0, 0), (0, 0, 1, 3))
    tokens = torch.tensor([[11, 12, 13, 14], [21, 22, 23, 24], [31, 32, 33, 34]])
    cache = RaggedCache(decoder, 64, len(prompts))
    width = max(len(p) for p in prompts) - 1
    ids = torch.tensor([p[:-1] + [0] * (width - len(p) + 1) for p in prompts])
    decoder.ragged(cache, ids, [len(p) - 1 for p in prompts], 1)
    starts = list(cache.lengths)
    logits = tree_pass_rows(decoder, cache, [p[-1] for p in prompts], shape, tokens)
    paths = [[1, 3], [], [2]]
    keep_paths(cache, starts, paths)
    after = decoder.ragged(cache, torch.tensor([[40], [41], [42]]), [1, 1, 1], 1)[:, -1]
    for b, prompt in enumerate(prompts):
        alone = Tree(tuple(tokens[b].tolist()), shape.parents)
        single = KVCache(decoder, 64)
        decoder(single, torch.tensor([prompt[:-1]]), 1)
        assert torch.allclose(logits[b], tree_pass(decoder, single, prompt[-1], alone),
                              atol=1e-4), b
        kept = [alone.tokens[n - 1] for n in paths[b]]
        fresh = pair.target(input_ids=torch.tensor([prompt + kept + [40 + b]])).logits[0, -1]
        assert torch.allclose(after[b], fresh, atol=1e-4), b


def test_greedy_rows_of_a_tree_batch_equal_the_target_alone(shipped):
    from engine.decoder.batched import BatchConfig
    from engine.decoder.tree_speculative import speculate_tree_batch

    pair, heads = shipped
    prompts = [PROMPT, "a", "And it came to pass, when the king heard these words, that",
               "hack n. 1. Originally, a quick job"]
    budgets = [30, 9, 41, 14]
    config = BatchConfig(prompts, temperature=0.0, max_new_tokens=budgets)
    done = speculate_tree_batch(pair, config, heads)
    for prompt, budget, tokens in zip(prompts, budgets, done.token_ids, strict=True):
        alone = GenerationConfig(prompt=prompt, temperature=0.0, max_new_tokens=budget)
        assert tokens == run_target_only(pair, alone)[1].token_ids, prompt
    assert done.accepted > 0 and done.tokens == sum(map(len, done.token_ids))


@pytest.mark.parametrize(("drawn", "rule", "lossless"), [
    (TOP, TOP, True), (IID, IID, True), (DISTINCT, DISTINCT, True),
    (TOP, IID, False),  # SpecInfer's ratio on deterministic children
    (DISTINCT, IID, False),  # the ratio that forgets the siblings drawn before
])
def test_each_rule_gives_p_on_the_children_it_was_made_for_and_a_wrong_one_does_not(
        drawn, rule, lossless):
    """Three children of the root, drawn from q as ``drawn`` says (the top three of q, i.i.d.,
    or without replacement), judged by ``rule``: the token that comes out is distributed as
    p exactly when the rule matches the draw. q here overlaps p, so a wrong rule shows (a
    model's q rarely does at random)."""
    from engine.decoder.tree_speculative import _draw

    p = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)
    q = torch.tensor([0.1, 0.2, 0.3, 0.4])
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(4)
    for _ in range(20_000):
        tokens = ([3, 2, 1] if drawn == TOP
                  else _draw(q[None], [(0,), (1,), (2,)], gen, distinct=drawn == DISTINCT))
        tree = Tree(tuple(tokens), (0, 0, 0))
        path, next_token = verify(tree, p.expand(4, 4), rule, torch.rand(4, generator=gen),
                                  {0: q})
        counts[tokens[path[0] - 1] if path else next_token] += 1
    pvalue = chi_square_pvalue(counts, p)
    assert pvalue > 1e-3 if lossless else pvalue < 1e-6


# ---- a draft model's tree ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def with_draft():
    return load_pair(str(MODELS / "target"), str(MODELS / "draft"), device="cpu")


@pytest.mark.parametrize("prompt", ["And it came to pass, when the king heard these words, that",
                                    "hack n. 1. Originally, a quick job", "a"])
def test_a_draft_models_chain_shaped_tree_is_its_chain_draft_for_draft(with_draft, prompt):
    from engine.decoder.events import CycleEvent
    from engine.decoder.tree_speculative import speculate_draft_tree

    config = GenerationConfig(prompt=prompt, temperature=0.0, max_new_tokens=40, k=3)
    chain = [e for e in speculate(with_draft, config) if isinstance(e, CycleEvent)]
    *cycles, done = speculate_draft_tree(with_draft, config, trees.chain(3))
    assert [c.tokens for c in cycles] == [[t.id for t in e.tokens[: e.proposed]]
                                          for e in chain]
    assert done.token_ids == run_target_only(with_draft, config)[1].token_ids


def test_a_draft_models_tree_writes_the_targets_text_and_is_distributed_as_it(with_draft):
    from engine.decoder.tree_speculative import speculate_draft_tree

    config = GenerationConfig(prompt=PROMPT, temperature=0.0, max_new_tokens=32)
    *cycles, done = speculate_draft_tree(with_draft, config, MEDUSA_TREE)
    assert done.token_ids == run_target_only(with_draft, config)[1].token_ids
    pair = dataclasses.replace(with_draft, stop_token_ids=frozenset())
    counts = torch.zeros(2, pair.shared_vocab_size)
    for seed in range(1000):
        sampled = GenerationConfig(prompt=PROMPT, temperature=1.0, max_new_tokens=2, seed=seed)
        first, second = list(speculate_draft_tree(pair, sampled, MEDUSA_TREE))[-1].token_ids
        counts[0, first] += 1
        counts[1, second] += 1
    p1, p2 = target_marginals(pair, PROMPT)
    assert chi_square_pvalue(counts[0], p1) > 1e-3
    assert chi_square_pvalue(counts[1], p2) > 1e-3
