"""EAGLE-2 trees: with one candidate a node the tree is the EAGLE chain, cycle for cycle; a
wider tree is the target's own output at temperature 0 and distributed as the target above
it; the reranked nodes always form a tree of the best scores."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from support.lossless import chi_square_pvalue, target_marginals

import engine.decoder.tree_speculative as tree_module
from engine.analytic.trees import TreeShape
from engine.decoder.baseline import run_target_only
from engine.decoder.drafter_spec import DrafterSpec
from engine.decoder.eagle import load_head_for
from engine.decoder.eagle_tree import _Node, _rerank, speculate_eagle_tree
from engine.decoder.events import CycleEvent, GenerationConfig
from engine.decoder.loading import load_pair
from engine.decoder.speculative import speculate
from engine.decoder.tree import IID, verify

MODELS = Path(__file__).parents[3] / "models"
PROMPTS = ("And it came to pass, when the king heard these words, that",
           "hack n. 1. Originally, a quick job that produces what is needed,", "a")


@pytest.fixture(scope="module")
def shipped():
    pair = load_pair(str(MODELS / "target"), str(MODELS / "draft"), device="cpu")
    return pair, load_head_for(pair, MODELS / "eagle")


@pytest.mark.parametrize("prompt", PROMPTS)
def test_one_candidate_a_node_is_the_eagle_chain_cycle_for_cycle(shipped, prompt):
    pair, head = shipped
    config = GenerationConfig(prompt=prompt, temperature=0.0, max_new_tokens=40, k=3)
    chain = [e for e in speculate(pair, config, drafter=DrafterSpec.eagle(head))
             if isinstance(e, CycleEvent)]
    *cycles, _ = speculate_eagle_tree(pair, config, head, TreeShape(3, 1, 4))
    assert [c.n_accepted for c in cycles] == [e.n_accepted for e in chain]
    assert [c.tokens for c in cycles] == [[t.id for t in e.tokens[: e.proposed]]
                                          for e in chain]


@pytest.mark.parametrize("expansion", [TreeShape(5, 4, 8), TreeShape(3, 2, 7),
                                       TreeShape(6, 4, 16)])
def test_a_confidence_tree_writes_what_the_target_alone_writes(shipped, expansion):
    pair, head = shipped
    for prompt in PROMPTS:
        config = GenerationConfig(prompt=prompt, temperature=0.0, max_new_tokens=32)
        *cycles, done = speculate_eagle_tree(pair, config, head, expansion)
        assert done.token_ids == run_target_only(pair, config)[1].token_ids, prompt
        assert all(len(c.tokens) == expansion.draft_tokens - 1 for c in cycles[1:])
    assert sum(c.n_accepted for c in cycles) > 0


PROMPT = "the quick brown fox"


def eagle_counts(pair, head, runs: int = 1200):
    pair = dataclasses.replace(pair, stop_token_ids=frozenset())
    counts = torch.zeros(2, pair.shared_vocab_size)
    for seed in range(runs):
        config = GenerationConfig(prompt=PROMPT, temperature=1.0, max_new_tokens=2, seed=seed)
        first, second = list(speculate_eagle_tree(pair, config, head,
                                                  TreeShape(2, 3, 6)))[-1].token_ids
        counts[0, first] += 1
        counts[1, second] += 1
    return counts


def test_sampled_tokens_are_distributed_as_the_target(shipped):
    pair, head = shipped
    counts = eagle_counts(pair, head)
    p1, p2 = target_marginals(pair, PROMPT)
    assert chi_square_pvalue(counts[0], p1) > 1e-3
    assert chi_square_pvalue(counts[1], p2) > 1e-3


def test_a_ratio_rule_on_the_heads_top_ranks_is_caught(shipped, monkeypatch):
    """SpecInfer's ratio rule (here against a uniform q) on children that are the head's top
    ranks, not draws from that q: lossy, and the harness says so."""
    pair, head = shipped
    seen = {}

    def ratio_rule(tree, p, rule, uniforms, q=None):
        flat = torch.full((p.shape[-1],), 1.0 / p.shape[-1], dtype=p.dtype)
        seen["called"] = True
        return verify(tree, p, IID, uniforms, {n: flat for n in range(tree.size + 1)})

    monkeypatch.setattr(tree_module, "verify", ratio_rule)
    counts = eagle_counts(pair, head, runs=600)
    assert seen and chi_square_pvalue(counts[0], target_marginals(pair, PROMPT)[0]) < 1e-6


def test_the_reranked_nodes_are_the_best_scores_and_a_tree():
    nodes = [_Node(10, 0, 1, -0.1), _Node(11, 0, 1, -2.0), _Node(12, 1, 2, -0.5),
             _Node(13, 1, 2, -3.0), _Node(14, 3, 3, -0.9), _Node(15, 2, 2, -2.1)]
    tree = _rerank(nodes, 4)
    assert tree.tokens == (10, 11, 12, 14)  # scores -0.1, -2.0, -0.5, -0.9: by depth
    assert tree.parents == (0, 0, 1, 3)


def test_a_tree_the_steps_cannot_fill_is_refused():
    with pytest.raises(ValueError, match="draft_tokens must be at most 7"):
        TreeShape(2, 2, 8).fillable()
    with pytest.raises(ValueError, match="steps >= 1"):
        TreeShape(0, 2, 8).fillable()


@torch.inference_mode()
def test_each_tree_entry_is_the_head_over_its_own_branch(shipped):
    """Two branches drafted together (a -> c, b -> d): each entry's output is the head's over
    its own branch alone, entry by entry after the same cached entries."""
    import copy

    _, head = shipped
    gen = torch.Generator().manual_seed(3)
    width = head.config.hidden_size
    cache = head.new_cache(1, 64)
    head(torch.randint(0, 4000, (1, 6), generator=gen), torch.randn(1, 6, width, generator=gen),
         torch.arange(6)[None], cache)
    root = torch.randn(width, generator=gen)
    a, b, c, d = 101, 202, 303, 404
    tree_kv: list = []
    first = head.forward_tree(torch.tensor([[a, b]]), torch.stack([root, root])[None],
                              torch.tensor([[6, 6]]), cache, tree_kv, torch.eye(2).bool())
    second = head.forward_tree(torch.tensor([[c, d]]), first, torch.tensor([[7, 7]]), cache,
                               tree_kv, torch.tensor([[1, 0, 1, 0], [0, 1, 0, 1]]).bool())
    for row, (top, below) in enumerate(((a, c), (b, d))):
        alone = copy.deepcopy(cache)
        one = head(torch.tensor([[top]]), root[None, None], torch.tensor([[6]]), alone)
        two = head(torch.tensor([[below]]), one, torch.tensor([[7]]), alone)
        assert torch.allclose(first[0, row], one[0, 0], atol=1e-5)
        assert torch.allclose(second[0, row], two[0, 0], atol=1e-5)
