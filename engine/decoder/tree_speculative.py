"""Speculative decoding with a token tree drafted by Medusa heads, one row.

    prefill the target with the prompt (all but its newest token)
    repeat until max new tokens or end of sequence:
        draft:   the static tree (paths of ranks): the node at depth d, rank r gets head d's
                 rank-r token (``top``), or each node's children are drawn i.i.d. from head
                 d's q (``iid``); head d reads the hidden state that chose the newest token
        verify:  one target pass over the whole tree (:func:`engine.decoder.tree.tree_pass`)
                 and the rule of :func:`engine.decoder.tree.verify`
        commit:  the accepted path's keys and values kept, the next token pending

Medusa heads draft a tree without a tree mask of their own: each depth's candidates come from
one head over one hidden state, whatever the branch (Medusa's "cartesian" trees). Each cycle is
a :class:`TreeCycle`; a :class:`~engine.decoder.events.DoneEvent` ends the run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from engine.decoder.common import done_event, encode_prompt, new_generator
from engine.decoder.events import DoneEvent, GenerationConfig
from engine.decoder.forward import KVCache
from engine.decoder.loading import ModelPair
from engine.decoder.medusa import MedusaHeads
from engine.decoder.sampling import greedy, sample_with, warp
from engine.decoder.tree import (
    RULES,
    TOP,
    Tree,
    keep_path,
    static_paths,
    tree_decoder,
    tree_of,
    tree_pass,
    uniforms_needed,
    verify,
)

# Medusa's own default tree for four heads is larger; this one keeps 10 nodes (a target pass
# over 11 tokens): the first head's top 3, then the best branch deeper.
RANKS = 8  # candidates a depth whose acceptance is counted (TreeCycle.ranks)
DEFAULT_CHOICES = ((0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 0, 1), (0, 1, 0),
                   (0, 0, 0, 0))


@dataclass
class TreeCycle:
    """One cycle: the tree drafted (``tokens``, ``parents``: node i + 1's parent, 0 the root),
    the accepted path (node numbers), the target's next token and how many of the path's
    tokens and it reached the output (``kept``). ``ranks``: at each depth the target's token
    reached (the accepted ones, then the next token), its rank among that depth's head's
    candidates (None past ``RANKS``): acceptance by rank and depth, whatever the tree held."""

    index: int
    tokens: list[int]
    parents: list[int]
    path: list[int]
    next_token: int
    kept: int
    draft_ms: float
    verify_ms: float
    ranks: list[int | None]
    event: str = "tree_cycle"

    @property
    def n_accepted(self) -> int:
        return len(self.path)


def speculate_tree(pair: ModelPair, config: GenerationConfig, heads: MedusaHeads,
                   choices: Sequence[Sequence[int]] = DEFAULT_CHOICES, rule: str = TOP,
                   ) -> Iterator[TreeCycle | DoneEvent]:
    """Tree speculation (see the module's docstring); bad settings raise ``ValueError``
    here, before anything runs."""
    config.validate()
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    paths = static_paths(choices)
    depth = max(len(p) for p in paths)
    if depth > heads.num_heads:
        raise ValueError(f"the tree is {depth} deep; the Medusa heads guess {heads.num_heads} "
                         "tokens at most")
    decoder = tree_decoder(pair)
    prompt_ids = encode_prompt(pair, config, lookahead=len(paths) + 1)
    return _run(pair, config, heads, paths, rule, decoder, prompt_ids)


def _run(pair, config, heads, paths, rule, decoder, prompt_ids):
    gen = new_generator(pair, config.seed)
    capacity = len(prompt_ids) + config.max_new_tokens + len(paths) + 2
    cache = KVCache(decoder, capacity)
    start = time.perf_counter()
    hidden: list = []
    if len(prompt_ids) > 1:
        decoder(cache, torch.tensor([prompt_ids[:-1]], device=pair.device), 1, hidden)
    h = hidden[0][0, -1] if hidden else None  # the state that chose the newest token
    prefill_ms = (time.perf_counter() - start) * 1000.0
    last, out, reason, decode_ms = prompt_ids[-1], [], "length", 0.0
    index = 0
    while len(out) < config.max_new_tokens:
        t0 = time.perf_counter()
        tree, q, ranked = _draft(heads, h, paths, rule, config, gen, pair.shared_vocab_size)
        t1 = time.perf_counter()
        at, states = cache.length, []
        logits = tree_pass(decoder, cache, last, tree, states)[:, : pair.shared_vocab_size]
        p = greedy(logits) if config.greedy else warp(logits, config.temperature,
                                                       config.top_k, config.top_p)
        u = torch.rand(uniforms_needed(tree), generator=gen, device=pair.device)
        path, next_token = verify(tree, p, rule, u, q)
        keep_path(cache, at, path)
        h = states[0][0, path[-1] if path else 0]
        emitted = [tree.tokens[n - 1] for n in path] + [next_token]
        ranks = [_rank(ranked, d, t) for d, t in enumerate(emitted) if ranked is not None
                 and d < len(ranked)]
        kept = min(len(emitted), config.max_new_tokens - len(out))
        stop = next((i for i, t in enumerate(emitted[:kept]) if t in pair.stop_token_ids), None)
        if stop is not None:
            kept, reason = stop + 1, "eos"
        out += emitted[:kept]
        t2 = time.perf_counter()
        decode_ms += (t2 - t0) * 1000.0
        yield TreeCycle(index, list(tree.tokens), list(tree.parents), path, next_token, kept,
                        (t1 - t0) * 1000.0, (t2 - t1) * 1000.0, ranks)
        index += 1
        if stop is not None:
            break
        last = next_token
    yield done_event("tree", pair, out, reason, prefill_ms, decode_ms)


def _rank(ranked: torch.Tensor, depth: int, token: int) -> int | None:
    where = (ranked[depth, :RANKS] == token).nonzero()
    return int(where[0, 0]) if len(where) else None


def _draft(heads: MedusaHeads, h, paths, rule: str, config: GenerationConfig,
           gen: torch.Generator, vocab: int
           ) -> tuple[Tree, dict[int, torch.Tensor], torch.Tensor | None]:
    """The tree for this cycle, per node the q its children were drawn from (depth d's head:
    one q for every node at depth d), and each head's candidates ranked ``[depth, V]``."""
    if h is None:  # a one-token prompt, first cycle: nothing to draft from yet
        return Tree((), ()), {}, None
    depth = max(len(p) for p in paths)
    with torch.inference_mode():
        logits = torch.stack([heads.logits(h.to(heads.lm_head.weight.dtype), d)[:vocab].float()
                              for d in range(depth)])  # [depth, V]
    q = warp(logits, config.temperature, config.top_k, config.top_p) if not config.greedy \
        else greedy(logits)
    ranked = logits.argsort(dim=-1, descending=True)
    if rule == TOP:
        tree = tree_of(paths, lambda path: ranked[len(path) - 1, path[-1]])
    else:
        def drawn(path):
            return sample_with(q[len(path) - 1], torch.rand((), generator=gen,
                                                              device=q.device))
        tree = tree_of(paths, drawn)
    depths = tree.depths()
    by_node = {node: q[depths[node]] for node in range(tree.size + 1) if depths[node] < depth}
    return tree, by_node, ranked



def rank_acceptance(cycles: Sequence[TreeCycle], depth: int, ranks: int = RANKS
                    ) -> list[list[float]]:
    """``acc[d][r]``: of the cycles whose target reached depth d + 1 along accepted tokens,
    the share whose token there was head d's rank-r candidate (what
    :mod:`engine.analytic.trees` prices a tree with)."""
    reached = [0] * depth
    hits = [[0] * ranks for _ in range(depth)]
    for cycle in cycles:
        for d, rank in enumerate(cycle.ranks[:depth]):
            reached[d] += 1
            if rank is not None and rank < ranks:
                hits[d][rank] += 1
            if rank is None or d >= len(cycle.path):  # the walk stopped here
                break
    return [[h / n if n else 0.0 for h in row] for row, n in zip(hits, reached, strict=True)]
