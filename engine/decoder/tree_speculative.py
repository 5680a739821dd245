"""Speculative decoding with a token tree, one row (:func:`run_tree`, whatever drafts the tree:
a :class:`TreeDrafter`), and the static trees of the Medusa heads (single stream and batched)
and of the draft model.

    prefill the target with the prompt (all but its newest token)
    repeat until max new tokens or end of sequence:
        draft:   the Medusa heads' static tree (paths of ranks): the node at depth d, rank r
                 gets head d's rank-r token (``top``), or each node's children are drawn from
                 head d's q, i.i.d. (``iid``) or without replacement (``distinct``); head d
                 reads the hidden state that chose the newest token. (The draft model: its
                 rank-r token after the node's parent; EAGLE-2: engine.decoder.eagle_tree.)
        verify:  one target pass over the whole tree (:func:`engine.decoder.tree.tree_pass`)
                 and the rule of :func:`engine.decoder.tree.verify`
        commit:  the accepted path's keys and values kept, the next token pending

Medusa heads draft a tree without a tree mask of their own: each depth's candidates come from
one head over one hidden state, whatever the branch (Medusa's "cartesian" trees). Each cycle is
a :class:`TreeCycle`; a :class:`~engine.decoder.events.DoneEvent` ends the run;
:func:`cycle_events` turns them into the live panel's events.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from engine.analytic import trees
from engine.decoder.batched import BatchConfig
from engine.decoder.common import (
    TextDecoder,
    detokenizer,
    done_event,
    encode_prompt,
    new_generator,
)
from engine.decoder.events import (
    ACCEPTED,
    DISCARDED,
    REJECTED,
    TARGET,
    CycleEvent,
    DoneEvent,
    GenerationConfig,
    Token,
    TreeDraft,
)
from engine.decoder.forward import KVCache, RaggedCache
from engine.decoder.loading import ModelPair
from engine.decoder.medusa import MedusaHeads
from engine.decoder.sampling import greedy, sample_with, warp
from engine.decoder.tree import (
    DISTINCT,
    RULES,
    TOP,
    Tree,
    keep_path,
    keep_paths,
    static_paths,
    tree_decoder,
    tree_of,
    tree_pass,
    tree_pass_rows,
    uniforms_needed,
    verify,
)

RANKS = 8  # candidates a depth whose acceptance is counted (TreeCycle.ranks)


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
                   choices: Sequence[Sequence[int]] = trees.MEDUSA_TREE, rule: str = TOP,
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
    drafter = MedusaTree(heads, paths, rule, config, pair.shared_vocab_size)
    return run_tree(pair, config, drafter, rule, decoder, prompt_ids, len(paths))


def cycle_events(pair: ModelPair, config: GenerationConfig, run: Iterator, drafter: str,
                 lookahead: int, depth: int, shape: str, paths: Sequence[Sequence[int]] = (),
                 ) -> Iterator[CycleEvent | DoneEvent]:
    """A tree run (``run``: its :class:`TreeCycle` s, then its :class:`DoneEvent`) as the
    live panel shows cycles: each a :class:`~engine.decoder.events.CycleEvent` carrying its
    tree (see its ``tree``), its ``k`` the tree's ``depth``. ``shape``: the tree as a link
    writes it; ``paths``: a static tree's (none for EAGLE-2's)."""
    prompt_ids = encode_prompt(pair, config, lookahead=lookahead)
    text = TextDecoder(detokenizer(pair.tokenizer), prompt_ids)
    try:
        for event in run:
            yield (event if isinstance(event, DoneEvent)
                   else _cycle_event(event, drafter, depth, shape, paths, text))
    finally:
        run.close()


def _cycle_event(cycle: TreeCycle, drafter: str, depth: int, shape: str, paths,
                 text: TextDecoder) -> CycleEvent:
    """One tree cycle as shown: every node's own text (its branch read after the output so
    far), the accepted path (as far as it reached the output), the children tried where the
    walk stopped (rejected), the rest (discarded), then the target's token."""
    n = len(cycle.path)
    shown = set(cycle.path[: cycle.kept])
    stop = cycle.path[-1] if cycle.path else 0
    tried = [i for i, parent in enumerate(cycle.parents, 1) if parent == stop]
    texts = [text.peek(_branch(cycle, node))[-1] for node in range(1, len(cycle.tokens) + 1)]
    kinds = [ACCEPTED if node in shown else REJECTED if node in tried else DISCARDED
             for node in range(1, len(cycle.tokens) + 1)]
    nodes = [Token(t, s, kind) for t, s, kind in zip(cycle.tokens, texts, kinds, strict=True)]
    for node in cycle.path[: cycle.kept]:
        text.push(cycle.tokens[node - 1])
    order = ([nodes[i - 1] for i in cycle.path if i in shown]
             + [nodes[i - 1] for i in tried] + [t for t in nodes if t.kind == DISCARDED])
    if cycle.kept > n:
        order.append(Token(cycle.next_token, text.push(cycle.next_token), TARGET))
    return CycleEvent(
        index=cycle.index, tokens=order, draft_ms=cycle.draft_ms, verify_ms=cycle.verify_ms,
        cycle_ms=cycle.draft_ms + cycle.verify_ms, k=depth, n_accepted=n,
        rejected=bool(tried), draft_step_ms=[cycle.draft_ms / depth] * depth, overlap=[],
        n_emitted=cycle.kept, drafter=drafter, n_proposed=depth,
        tree=TreeDraft(nodes, list(cycle.parents), [list(p) for p in paths], cycle.ranks,
                       shape))


def _branch(cycle: TreeCycle, node: int) -> list[int]:
    """The tokens of ``node``'s branch: from the root's child on its path down to it."""
    branch = []
    while node:
        branch.append(cycle.tokens[node - 1])
        node = cycle.parents[node - 1]
    return branch[::-1]


class TreeDrafter(Protocol):
    """What drafts a tree each cycle of :func:`run_tree` (one row)."""

    def prefill(self, prompt_ids: list[int], hidden: torch.Tensor | None) -> None:
        """``hidden [n - 1, H]``: the target's final hidden states over the prompt but its
        newest token (None for a one-token prompt)."""

    def draft(self, gen: torch.Generator
              ) -> tuple[Tree, dict[int, torch.Tensor] | None, dict[int, torch.Tensor] | None]:
        """The tree, per node the q its children were drawn from (None: deterministic
        children), and per node its candidates ranked, best first (None: not ranked; the
        ranks of the target's tokens along the accepted path are read from them)."""

    def commit(self, path: list[int], next_token: int, tree: Tree,
               states: torch.Tensor) -> None:
        """After the rule: ``states [N + 1, H]`` the target's final hidden states over the
        root and the tree's nodes."""


class MedusaTree:
    """Medusa heads drafting the static tree ``paths``: head d reads the hidden state that
    chose the newest token."""

    def __init__(self, heads: MedusaHeads, paths, rule: str, config: GenerationConfig,
                 vocab: int):
        self.heads, self.paths, self.rule, self.config, self.vocab = (heads, paths, rule,
                                                                      config, vocab)
        self.h: torch.Tensor | None = None

    def prefill(self, prompt_ids, hidden) -> None:
        self.h = None if hidden is None else hidden[-1]  # the state that chose the newest

    def draft(self, gen):
        if self.h is None:  # a one-token prompt, first cycle: nothing to draft from yet
            return Tree((), ()), {}, None
        tokens, q, ranked = _draft_rows(self.heads, self.h[None], self.paths, self.rule,
                                        self.config, [gen], self.vocab, RANKS)
        shape = tree_of(self.paths, lambda path: 0)
        tree = Tree(tuple(tokens[0].tolist()), shape.parents)
        depths = tree.depths()
        return tree, _q_by_node(tree, q[0]), {node: ranked[0, d] for node, d in
                                              enumerate(depths) if d < ranked.shape[1]}

    def commit(self, path, next_token, tree, states) -> None:
        self.h = states[path[-1] if path else 0]


class DraftModelTree:
    """The pair's draft model drafting the static tree ``paths``: node ``(r_1 .. r_d)`` is the
    draft's rank-``r_d`` token after its parent's branch. One draft pass a depth over the tree
    drafted so far (each node seeing its ancestors, as the target's verification does), its
    keys and values dropped after; the accepted tokens then extend the draft's cache."""

    def __init__(self, pair: ModelPair, paths, capacity: int):
        self.decoder = tree_decoder(pair, pair.draft, "draft model")
        self.cache = KVCache(self.decoder, capacity)
        self.paths, self.vocab, self.device = paths, pair.shared_vocab_size, pair.device
        self.root = 0

    def prefill(self, prompt_ids, hidden) -> None:
        if len(prompt_ids) > 1:
            self.decoder(self.cache, torch.tensor([prompt_ids[:-1]], device=self.device), 1)
        self.root = prompt_ids[-1]

    @torch.inference_mode()
    def draft(self, gen):
        start, tokens, candidates = self.cache.length, {}, {}
        for depth in range(1, max(map(len, self.paths)) + 1):
            known = [p for p in self.paths if len(p) < depth]
            logits = tree_pass(self.decoder, self.cache, self.root,
                               tree_of(known, tokens.__getitem__))[:, : self.vocab]
            self.cache.length = start  # the draft keeps only what the target verified
            row = {(): 0} | {p: i for i, p in enumerate(known, 1)}
            level = [p for p in self.paths if len(p) == depth]
            best = logits.topk(max(RANKS, max(p[-1] for p in level) + 1), dim=-1).indices
            for parent in {p[:-1] for p in level}:
                candidates[parent] = best[row[parent]]
            for p in level:
                tokens[p] = int(candidates[p[:-1]][p[-1]])
        tree = tree_of(self.paths, tokens.__getitem__)
        number = {(): 0} | {p: i for i, p in enumerate(self.paths, 1)}
        return tree, None, {number[p]: ranked for p, ranked in candidates.items()}

    @torch.inference_mode()
    def commit(self, path, next_token, tree, states) -> None:
        kept = [self.root] + [tree.tokens[n - 1] for n in path]
        self.decoder(self.cache, torch.tensor([kept], device=self.device), 1)
        self.root = next_token


def speculate_draft_tree(pair: ModelPair, config: GenerationConfig,
                         choices: Sequence[Sequence[int]]) -> Iterator[TreeCycle | DoneEvent]:
    """The pair's draft model drafting a static tree (paths of ranks, see
    :class:`DraftModelTree`), verified by the rule ``top`` (its children are the draft's top
    ranks); bad settings raise ``ValueError`` here."""
    config.validate()
    if pair.draft is None:
        raise ValueError("a draft model's tree needs a draft model; this pair has none")
    paths = static_paths(choices)
    decoder = tree_decoder(pair)
    prompt_ids = encode_prompt(pair, config, lookahead=len(paths) + 1)
    capacity = len(prompt_ids) + config.max_new_tokens + len(paths) + 2
    return run_tree(pair, config, DraftModelTree(pair, paths, capacity), TOP, decoder,
                    prompt_ids, len(paths))


def run_tree(pair: ModelPair, config: GenerationConfig, drafter: TreeDrafter, rule: str,
             decoder, prompt_ids: list[int], lookahead: int
             ) -> Iterator[TreeCycle | DoneEvent]:
    """The loop of every tree run (see the module's docstring): ``drafter`` drafts, one
    target pass verifies by ``rule``, the accepted path's cache is kept."""
    gen = new_generator(pair, config.seed)
    cache = KVCache(decoder, len(prompt_ids) + config.max_new_tokens + lookahead + 2)
    start = time.perf_counter()
    hidden: list = []
    if len(prompt_ids) > 1:
        decoder(cache, torch.tensor([prompt_ids[:-1]], device=pair.device), 1, hidden)
    drafter.prefill(prompt_ids, hidden[0][0] if hidden else None)
    prefill_ms = (time.perf_counter() - start) * 1000.0
    last, out, reason, decode_ms = prompt_ids[-1], [], "length", 0.0
    index = 0
    while len(out) < config.max_new_tokens:
        t0 = time.perf_counter()
        tree, q, ranked = drafter.draft(gen)
        t1 = time.perf_counter()
        at, states = cache.length, []
        logits = tree_pass(decoder, cache, last, tree, states)[:, : pair.shared_vocab_size]
        p = greedy(logits) if config.greedy else warp(logits, config.temperature,
                                                       config.top_k, config.top_p)
        u = torch.rand(uniforms_needed(tree), generator=gen, device=pair.device)
        path, next_token = verify(tree, p, rule, u, q)
        keep_path(cache, at, path)
        drafter.commit(path, next_token, tree, states[0][0])
        emitted = [tree.tokens[n - 1] for n in path] + [next_token]
        along = [0, *path]  # the node each emitted token was a candidate of
        ranks = [] if ranked is None else [_rank(ranked[n], t) for n, t in zip(along, emitted,
                                                                               strict=True)
                                           if n in ranked]
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


def _rank(ranked: torch.Tensor, token: int) -> int | None:
    where = (ranked[:RANKS] == token).nonzero()
    return int(where[0, 0]) if len(where) else None


def _q_by_node(tree: Tree, q: torch.Tensor) -> dict[int, torch.Tensor]:
    """Per node, the q ``[V]`` its children were drawn from: depth d's head's (``q [depth,
    V]``)."""
    depths = tree.depths()
    return {node: q[depths[node]] for node in range(tree.size + 1) if depths[node] < len(q)}


@torch.inference_mode()
def _draft_rows(heads: MedusaHeads, h: torch.Tensor, paths, rule: str,
                config: GenerationConfig, gens: list[torch.Generator], vocab: int,
                ranks: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every row's tree tokens ``[B, N]`` in ``paths``' order from the heads over ``h [B,
    H]``: head d's rank-r candidate at a depth-(d + 1), rank-r node (``top``), or each node
    drawn from head d's q with the row's generator in path order (``iid``); with each row's
    ``q [B, depth, V]`` and its best candidates ranked ``[B, depth, R]`` (R: the ranks the
    paths use, at least ``ranks``)."""
    depth = max(len(p) for p in paths)
    h = h.to(heads.lm_head.weight.dtype)
    logits = torch.stack([heads.logits(h, d)[:, :vocab].float() for d in range(depth)], dim=1)
    q = greedy(logits) if config.greedy else warp(logits, config.temperature, config.top_k,
                                                  config.top_p)
    width = min(max(ranks, max(p[-1] for p in paths) + 1), logits.shape[-1])
    ranked = logits.topk(width, dim=-1).indices  # a sort of the whole vocabulary is not needed
    if rule == TOP:
        at_depth = torch.tensor([len(p) - 1 for p in paths], device=h.device)
        at_rank = torch.tensor([p[-1] for p in paths], device=h.device)
        return ranked[:, at_depth, at_rank], q, ranked
    draws = [_draw(q[b], paths, gen, distinct=rule == DISTINCT) for b, gen in enumerate(gens)]
    return torch.tensor(draws, device=h.device), q, ranked


def _draw(q: torch.Tensor, paths, gen: torch.Generator, distinct: bool) -> list[int]:
    """One row's nodes in path order, each from its depth's head's ``q [depth, V]`` with
    ``gen``: independently, or (``distinct``) without the siblings drawn before it."""
    out: list[int] = []
    siblings: dict[tuple[int, ...], list[int]] = {}
    for path in paths:
        probs = q[len(path) - 1]
        taken = siblings.setdefault(path[:-1], [])
        if distinct and taken:
            probs = probs.clone()
            probs[taken] = 0.0
        x = int(sample_with(probs, torch.rand((), generator=gen, device=q.device)))
        taken.append(x)
        out.append(x)
    return out


def rank_acceptance(cycles: Sequence[TreeCycle], depth: int, ranks: int = RANKS
                    ) -> list[list[float]]:
    """Acceptance by rank and depth of these cycles
    (:func:`engine.analytic.trees.rank_acceptance`)."""
    return trees.rank_acceptance([(c.ranks, len(c.path)) for c in cycles], depth, ranks)


@dataclass
class TreeBatchDone:
    """A batched tree run: each row's tokens, the steps, and the counts and time over all
    rows (``cycles``: row-cycles, ``accepted``: their accepted drafts)."""

    token_ids: list[list[int]]
    steps: int
    cycles: int
    accepted: int
    tokens: int
    decode_ms: float

    @property
    def tok_s(self) -> float:
        return 1000.0 * self.tokens / self.decode_ms if self.decode_ms > 0 else 0.0


def speculate_tree_batch(pair: ModelPair, config: BatchConfig, heads: MedusaHeads,
                         choices: Sequence[Sequence[int]] = trees.MEDUSA_TREE, rule: str = TOP
                         ) -> TreeBatchDone:
    """``B`` rows decoded together, every cycle one target pass over every row's tree (one
    shape, each row's own tokens; :func:`engine.decoder.tree.tree_pass_rows`), each row
    verified by the rule with its own generator. A row with no hidden state yet (a one-token
    prompt) drafts from zeros, and its tree is simply rejected. Bad settings raise
    ``ValueError`` before anything runs."""
    config.validate()
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    paths = static_paths(choices)
    if max(len(p) for p in paths) > heads.num_heads:
        raise ValueError(f"the tree is deeper than the {heads.num_heads} Medusa heads")
    decoder = tree_decoder(pair)
    prompts = [encode_prompt(pair, config.row(b), lookahead=len(paths) + 1)
               for b in range(len(config.prompts))]
    shape = tree_of(paths, lambda path: 0)
    limits = config.per_row(config.max_new_tokens)
    gens = [new_generator(pair, seed) for seed in config.per_row(config.seeds)]
    vocab, device = pair.shared_vocab_size, pair.device
    cache = RaggedCache(decoder, max(map(len, prompts)) + max(limits) + len(paths) + 2,
                        len(prompts))
    width = max(map(len, prompts)) - 1
    hidden: list = []
    h = torch.zeros((len(prompts), pair.target.config.hidden_size), device=device)
    if width > 0:
        ids = torch.tensor([p[:-1] + [0] * (width - len(p) + 1) for p in prompts], device=device)
        decoder.ragged(cache, ids, [len(p) - 1 for p in prompts], 1, hidden)
        for b, p in enumerate(prompts):
            if len(p) > 1:
                h[b] = hidden[0][b, len(p) - 2]
    rows, last = list(range(len(prompts))), [p[-1] for p in prompts]
    out: list[list[int]] = [[] for _ in prompts]
    steps = cycles = accepted = 0
    start = time.perf_counter()
    while rows:
        tokens, q, _ = _draft_rows(heads, h, paths, rule, config, gens, vocab)
        starts, states = list(cache.lengths), []
        logits = tree_pass_rows(decoder, cache, last, shape, tokens, states)[..., :vocab]
        p = greedy(logits) if config.greedy else warp(logits, config.temperature,
                                                       config.top_k, config.top_p)
        found = []
        for b in range(len(rows)):
            tree = Tree(tuple(tokens[b].tolist()), shape.parents)
            u = torch.rand(uniforms_needed(tree), generator=gens[b], device=device)
            found.append(verify(tree, p[b], rule, u, _q_by_node(tree, q[b])))
        paths_kept = [path for path, _ in found]
        keep_paths(cache, starts, paths_kept)
        live = []
        for b, (path, next_token) in enumerate(found):
            row = rows[b]
            h[b] = states[0][b, path[-1] if path else 0]
            emitted = [int(tokens[b, n - 1]) for n in path] + [next_token]
            room = limits[row] - len(out[row])
            stop = next((i for i, t in enumerate(emitted[:room]) if t in pair.stop_token_ids),
                        None)
            out[row] += emitted[: room if stop is None else stop + 1]
            cycles, accepted = cycles + 1, accepted + len(path)
            last[b] = next_token
            if stop is None and len(out[row]) < limits[row]:
                live.append(b)
        steps += 1
        if len(live) < len(rows):
            cache.keep_rows(live)
            h, rows = h[live], [rows[b] for b in live]
            last, gens = [last[b] for b in live], [gens[b] for b in live]
    decode_ms = (time.perf_counter() - start) * 1000.0
    return TreeBatchDone(out, steps, cycles, accepted, sum(map(len, out)), decode_ms)
