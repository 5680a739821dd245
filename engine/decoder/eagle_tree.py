"""EAGLE-2: an EAGLE head drafting a token tree by its own confidence (Li et al. 2024, arXiv
2406.16858), as SGLang serves it, one row.

    expand   pass 1: the head over its pending entries; at the newest, its top-k tokens, each
             scored log q. Pass d = 2..steps: the top-k nodes of depth d - 1 by score (the sum
             of log q along the path) run through the head together, each seeing the cache
             and its own ancestors only (a tree mask over the head's draft entries); each
             gives its top-k children, scored
    rerank   the ``draft_tokens - 1`` nodes with the highest scores: a tree, since a child's
             score never passes its parent's
    verify   one target pass over the tree, the rule ``top`` (the children are the head's
             top ranks: deterministic; engine.decoder.tree)
    commit   the accepted path's target keys and values kept; the head's next entries are the
             path's tokens and the next token beside the target's features along the path

SGLang's three numbers name it (:class:`engine.analytic.trees.TreeShape`, the shape the plan
prices): ``--speculative-num-steps`` (``steps``, the depth), ``--speculative-eagle-topk``
(``topk``) and ``--speculative-num-draft-tokens`` (``draft_tokens``, the root among them).
With ``topk`` 1 the tree is the EAGLE chain of ``steps`` drafts (the tests hold the two to
the same cycles at temperature 0).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from engine.analytic.trees import TreeShape
from engine.decoder.common import encode_prompt
from engine.decoder.eagle import EagleHead
from engine.decoder.events import DoneEvent, GenerationConfig
from engine.decoder.loading import ModelPair
from engine.decoder.tree import TOP, Tree, tree_decoder
from engine.decoder.tree_speculative import TreeCycle, run_tree

SGLANG_DEFAULT = TreeShape(5, 4, 8)  # SGLang's documented defaults


def speculate_eagle_tree(pair: ModelPair, config: GenerationConfig, head: EagleHead,
                         shape: TreeShape = SGLANG_DEFAULT) -> Iterator[TreeCycle | DoneEvent]:
    """EAGLE-2 speculation (see the module's docstring): a :class:`TreeCycle` per cycle,
    then a :class:`DoneEvent`. Bad settings raise ``ValueError`` here."""
    config.validate()
    shape.fillable()
    decoder = tree_decoder(pair)
    prompt_ids = encode_prompt(pair, config, lookahead=shape.draft_tokens)
    capacity = len(prompt_ids) + config.max_new_tokens + shape.draft_tokens + 2
    drafter = EagleTree(head, pair.shared_vocab_size, capacity, shape, pair.device)
    return run_tree(pair, config, drafter, TOP, decoder, prompt_ids, shape.draft_tokens)


@dataclass
class _Node:
    token: int
    parent: int  # index into the candidates + 1; 0: the root
    depth: int
    score: float  # sum of log q along the path


class EagleTree:
    """The head as a :class:`engine.decoder.tree_speculative.TreeDrafter`."""

    def __init__(self, head: EagleHead, vocab: int, capacity: int, shape: TreeShape,
                 device: torch.device):
        self.head, self.vocab, self.shape, self.device = head, vocab, shape, device
        self.cache = head.new_cache(1, capacity)
        self.verified = 0
        # entries not yet run: tokens, positions and the target's features [n, H] chunks
        self.pending: tuple[list[int], list[int], list[torch.Tensor]] = ([], [], [])

    def prefill(self, prompt_ids: list[int], hidden: torch.Tensor | None) -> None:
        n = len(prompt_ids) - 1
        self.cache.rollback([0])
        self.verified = 0
        self.pending = (list(prompt_ids[1:]), list(range(n)), [hidden] if n > 0 else [])

    @torch.inference_mode()
    def draft(self, gen: torch.Generator):
        ids, where, chunks = self.pending
        if not ids:  # a one-token prompt, first cycle: nothing to draft from yet
            return Tree((), ()), None, None
        dtype = self.head.fc.weight.dtype
        self.cache.rollback([self.verified])
        out = self.head(torch.tensor([ids], device=self.device), torch.cat(chunks)[None]
                        .to(dtype), torch.tensor([where], device=self.device), self.cache)
        self.verified += len(ids)
        self.pending = ([], [], [])
        base, topk = where[-1], self.shape.topk
        nodes: list[_Node] = []
        feature_of = {0: out[0, -1]}  # a node run through the head: its output feature
        frontier, tree_kv = [0], []
        ancestors: dict[int, list[int]] = {0: []}  # run order of each run node's ancestors
        run: list[int] = []  # the nodes run through the head, in order
        for depth in range(1, self.shape.steps + 1):
            if depth > 1:  # the best topk nodes of the last depth, run together
                frontier = heapq.nlargest(topk, (i + 1 for i, n in enumerate(nodes)
                                                 if n.depth == depth - 1),
                                          key=lambda i: nodes[i - 1].score)
                features = torch.stack([feature_of[nodes[i - 1].parent] for i in frontier])
                mask = torch.zeros((len(frontier), len(run) + len(frontier)), dtype=torch.bool,
                                   device=self.device)
                for row, i in enumerate(frontier):
                    ancestors[i] = ancestors[nodes[i - 1].parent] + [len(run) + row]
                    mask[row, ancestors[i]] = True
                outs = self.head.forward_tree(
                    torch.tensor([[nodes[i - 1].token for i in frontier]], device=self.device),
                    features[None], torch.full((1, len(frontier)), base + depth - 1,
                                               device=self.device), self.cache, tree_kv, mask)
                run += frontier
                for row, i in enumerate(frontier):
                    feature_of[i] = outs[0, row]
            logits = self.head.logits(torch.stack([feature_of[i] for i in frontier]))
            logq = torch.log_softmax(logits[:, : self.vocab].float(), dim=-1)
            best = logq.topk(min(topk, self.vocab), dim=-1)
            for row, parent in enumerate(frontier):
                score = nodes[parent - 1].score if parent else 0.0
                for value, token in zip(best.values[row].tolist(), best.indices[row].tolist(),
                                        strict=True):
                    nodes.append(_Node(token, parent, depth, score + value))
        return _rerank(nodes, self.shape.draft_tokens - 1), None, None

    def commit(self, path: list[int], next_token: int, tree: Tree,
               states: torch.Tensor) -> None:
        tokens = [tree.tokens[n - 1] for n in path] + [next_token]
        self.pending = (tokens, list(range(self.verified, self.verified + len(tokens))),
                        [states[[0, *path]]])


def _rerank(nodes: list[_Node], budget: int) -> Tree:
    """The ``budget`` best-scored nodes as a tree (parents first: a parent scores at least as
    much as its child and is shallower), siblings by score."""
    order = sorted(range(1, len(nodes) + 1),
                   key=lambda i: (-nodes[i - 1].score, nodes[i - 1].depth))[:budget]
    kept = sorted(order, key=lambda i: (nodes[i - 1].depth, -nodes[i - 1].score))
    number = {0: 0} | {i: n for n, i in enumerate(kept, 1)}
    return Tree(tuple(nodes[i - 1].token for i in kept),
                tuple(number[nodes[i - 1].parent] for i in kept))
