"""Token trees: several draft continuations verified in one target pass, losslessly.

    draft:   a tree of N tokens under the row's newest token (the root): node i has a parent
             (0: the root) and a depth; its siblings are tried in their order
    verify:  ONE target pass over [root, t_1..t_N], token i at rotary position start + depth(i),
             attending to the cache and to its own ancestors only (a 4D mask): p at every node
    rule:    from the root, try the children in order; accept one and go down, or, when every
             child is rejected (or there is none), draw the next token from what is left of p
    commit:  the accepted path's keys and values gathered, layer by layer, to the positions
             after the root (they were rotated for their depth, which is their new position);
             the rest dropped

The rule must match how the children were drawn (tests/engine/decoder/test_tree.py proves both
by chi-square, with a broken-rule control):

- ``top`` (children chosen deterministically, e.g. each head's top-b): child x is accepted
  with probability ``p'(x)``, where ``p'`` is the node's p with the siblings already rejected
  removed and renormalised; after all fail the next token is drawn from ``p'`` (SpecTr, Sun et
  al. 2023; multi-draft selection with deterministic drafts, Khisti et al. 2024).
- ``iid`` (children drawn independently from one ``q``): SpecInfer's multi-step speculative
  sampling (Miao et al. 2023): child x is accepted with ``min(1, p'(x) / q(x))``, and after a
  rejection ``p' <- norm(max(p' - q, 0))``.
- ``distinct`` (children drawn from ``q`` without replacement, so siblings never repeat):
  recursive rejection sampling (Jeon et al. 2024, "Recursive Speculative Decoding"): the same
  step with ``q'``, the node's q with the siblings already drawn removed and renormalised:
  accept with ``min(1, p'(x) / q'(x))``, after a rejection ``p' <- norm(max(p' - q', 0))`` and
  ``x`` leaves ``q'``.

Applying the ``iid`` ratio to deterministic children is lossy, and so is applying it to
children drawn without replacement; the chi-square test catches both. At temperature 0 ``p`` is
one-hot, so every rule follows the target's argmax: greedy output equals the target alone.

Trees run on the engine's own forward pass (Llama-family decoders without a sliding window):
a sliding window or a recurrent (linear-attention) layer cannot verify a tree in one pass this
way (their state is a chain), so those models are refused with the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.decoder.forward import FastDecoder, KVCache, RaggedCache

TOP, IID, DISTINCT = "top", "iid", "distinct"
RULES = (TOP, IID, DISTINCT)


@dataclass(frozen=True)
class Tree:
    """``tokens[i]`` is node ``i + 1``; ``parents[i]`` its parent (0: the root, else an
    earlier node: parents come before their children)."""

    tokens: tuple[int, ...]
    parents: tuple[int, ...]

    def __post_init__(self) -> None:
        for i, parent in enumerate(self.parents, 1):
            if not 0 <= parent < i:
                raise ValueError(f"node {i}'s parent must be an earlier node or the root (0), "
                                 f"got {parent}")

    @property
    def size(self) -> int:
        return len(self.tokens)

    def depths(self) -> list[int]:
        """The depth of every node of the pass, the root's (0) first: ``[N + 1]``."""
        depth = [0]
        for parent in self.parents:
            depth.append(depth[parent] + 1)
        return depth

    def children(self, node: int) -> list[int]:
        return [i for i, parent in enumerate(self.parents, 1) if parent == node]

    def mask(self) -> torch.Tensor:
        """``[N + 1, N + 1]`` bool: node i (0: the root) sees node j when j is i or one of its
        ancestors (one per shape: the same tree is verified every cycle)."""
        return _ancestors(self.parents)


@functools.lru_cache(maxsize=64)
def _ancestors(parents: tuple[int, ...]) -> torch.Tensor:
    n = len(parents) + 1
    seen = torch.zeros((n, n), dtype=torch.bool)
    seen[0, 0] = True
    for i, parent in enumerate(parents, 1):
        seen[i] = seen[parent]
        seen[i, i] = True
    return seen


def static_paths(choices: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """A static tree given as paths of ranks (Medusa's "choices": ``(0,)`` the first child of
    the root, ``(0, 1)`` the second child of that one), checked and in depth order: every
    path's prefix is a path too, and ranks under one parent run 0, 1, 2 ... ."""
    paths = sorted({tuple(int(r) for r in c) for c in choices}, key=lambda p: (len(p), p))
    known = {()}
    for path in paths:
        if not path or min(path) < 0:
            raise ValueError(f"a path is one rank or more, each at least 0 (got {path})")
        if path[:-1] not in known:
            raise ValueError(f"path {path} needs its parent path {path[:-1]} in the tree")
        if path[-1] > 0 and path[:-1] + (path[-1] - 1,) not in known:
            raise ValueError(f"path {path} needs its elder sibling "
                             f"{path[:-1] + (path[-1] - 1,)} in the tree")
        known.add(path)
    return paths


def tree_of(paths: Sequence[tuple[int, ...]], token_at) -> Tree:
    """The tree of ``paths`` (:func:`static_paths`), ``token_at(path)`` giving each node's
    token."""
    index = {(): 0}
    tokens, parents = [], []
    for path in paths:
        parents.append(index[path[:-1]])
        tokens.append(int(token_at(path)))
        index[path] = len(tokens)
    return Tree(tuple(tokens), tuple(parents))


def verify(tree: Tree, p: torch.Tensor, rule: str, uniforms: torch.Tensor,
           q: dict[int, torch.Tensor] | None = None) -> tuple[list[int], int]:
    """The rule (see the module's docstring) on the target's ``p [N + 1, V]`` (row 0 the
    root's). ``uniforms``: one a node tried and one for the final draw, in order; ``q[node]``
    (rules ``iid`` and ``distinct``): the distribution ``[V]`` that node's children were
    drawn from. Returns
    the accepted path (node numbers, root excluded) and the next token."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    if greedy_rows(p):  # one-hot p: either rule follows the target's argmax, no draws
        return follow_argmax(tree, p.argmax(dim=-1).tolist())
    path: list[int] = []
    node, used = 0, 0
    while True:
        left = p[node].double().clone()
        # the q the next child was drawn from (none at a leaf)
        drawn = q[node].double().clone() if rule != TOP and node in q else None
        accepted = None
        for child in tree.children(node):
            x = tree.tokens[child - 1]
            total = left.sum()
            if rule == TOP:
                chance = left[x] / total if total > 0 else torch.zeros((), dtype=left.dtype)
            elif drawn.sum() <= 0:  # siblings drawn without replacement used up q's support
                used += 1
                continue
            else:
                qx = drawn[x] / drawn.sum()
                chance = torch.clamp(left[x] / (total * qx), max=1.0) if qx > 0 else 0.0
            u = uniforms[used]
            used += 1
            if u < chance:
                accepted = child
                break
            if rule == TOP:
                left[x] = 0.0
                continue
            left = torch.clamp(left / total - drawn / drawn.sum(), min=0.0)
            if rule == DISTINCT:  # the next sibling was drawn without this one
                drawn[x] = 0.0
        if accepted is None:
            left = left if left.sum() > 0 else p[node].double()
            cdf = left.cumsum(0)
            x = int(torch.searchsorted(cdf, (1.0 - uniforms[used].double()) * cdf[-1]))
            return path, min(x, len(left) - 1)
        path.append(accepted)
        node = accepted


def greedy_rows(p: torch.Tensor) -> bool:
    """Whether every row of ``p`` is one-hot (temperature 0)."""
    return bool((p.max(dim=-1).values == 1.0).all())


def follow_argmax(tree: Tree, argmax: list[int]) -> tuple[list[int], int]:
    """The rule at temperature 0: from the root, go to the child whose token is the target's
    argmax at the node, until none is; the next token is the argmax there."""
    path, node = [], 0
    while True:
        child = next((c for c in tree.children(node) if tree.tokens[c - 1] == argmax[node]),
                     None)
        if child is None:
            return path, argmax[node]
        path.append(child)
        node = child


def uniforms_needed(tree: Tree) -> int:
    """The most uniforms :func:`verify` can use: one a node and one final draw."""
    return tree.size + 1


@torch.inference_mode()
def tree_pass(decoder: FastDecoder, cache: KVCache, root: int, tree: Tree,
              hidden: list | None = None) -> torch.Tensor:
    """The target over ``[root, t_1..t_N]`` after what ``cache`` holds: node i at rotary
    position ``start + depth(i)``, seeing the cache and its ancestors. Logits ``[N + 1, V]``;
    the keys and values sit at ``start .. start + N`` until :func:`keep_path`."""
    start, n = cache.length, tree.size + 1
    device = decoder.embed.device
    cache.reserve(start + n)
    ids = torch.tensor([[root, *tree.tokens]], device=device)
    depth = torch.tensor(tree.depths(), device=device)
    cos, sin = decoder._rope_table(start + int(depth.max()) + 1)
    positions = start + depth
    mask = torch.cat([torch.ones((n, start), dtype=torch.bool), tree.mask()], dim=1)
    logits = decoder._pass(cache.slot, ids, n, cos[positions], sin[positions],
                           slice(start, start + n), mask.to(device), hidden)
    cache.length = start + n
    return logits[0]


@torch.inference_mode()
def keep_path(cache: KVCache, start: int, path: list[int]) -> None:
    """After :func:`tree_pass` at ``start``: the accepted nodes' keys and values moved to
    ``start + 1 ..`` (the root stays at ``start``), the rest dropped."""
    if path:
        source = torch.tensor([start + node for node in path], device=cache.kv.device)
        for k_cache, v_cache in cache.slot.layers:
            k_cache[:, :, start + 1 : start + 1 + len(path)] = k_cache[:, :, source]
            v_cache[:, :, start + 1 : start + 1 + len(path)] = v_cache[:, :, source]
    cache.length = start + 1 + len(path)


def tree_decoder(pair, model=None, role: str = "target") -> FastDecoder:
    """The engine's pass for the pair's target (or ``model``, the ``role`` it plays); ValueError
    (the reason) where a tree cannot run through it in one pass."""
    model = pair.target if model is None else model
    config = model.config
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        raise ValueError(f"the {role} has a sliding attention window: a tree's branches would "
                         "each need the window of their own path, so it cannot be verified in "
                         "one pass; speculate with a chain")
    decoder = FastDecoder.of(model)
    if decoder is None or decoder.hooked():
        raise ValueError(f"token trees need the engine's own forward pass (Llama, Mistral "
                         f"without a window, Qwen2 with SDPA attention): this {role} runs "
                         "through transformers' pass, whose recurrent or windowed state is a "
                         "chain; speculate with a chain")
    return decoder


@torch.inference_mode()
def tree_pass_rows(decoder: FastDecoder, cache: RaggedCache, roots: list[int], tree: Tree,
                   tokens: torch.Tensor, hidden: list | None = None) -> torch.Tensor:
    """:func:`tree_pass` for ``B`` rows of one tree shape (``tree.parents``), row ``b``'s
    nodes ``tokens[b] [N]`` after its own cache length. Logits ``[B, N + 1, V]``."""
    n = tree.size + 1
    device = decoder.embed.device
    lengths = torch.tensor(cache.lengths, device=device)
    upto = int(lengths.max()) + n
    cache.reserve(upto)
    ids = torch.cat([torch.tensor(roots, device=device)[:, None], tokens.to(device)], dim=1)
    depth = torch.tensor(tree.depths(), device=device)
    where = lengths[:, None] + torch.arange(n, device=device)  # storage [B, n]
    positions = lengths[:, None] + depth  # rotary positions [B, n]
    cos, sin = decoder._rope_table(int(positions.max()) + 1)
    columns = torch.arange(upto, device=device)
    before = columns[None, None, :] < lengths[:, None, None]  # [B, 1, upto]: each cache
    inside = (columns[None, :] - lengths[:, None]).clamp(0, n - 1)  # [B, upto]
    tree_mask = tree.mask().to(device)
    in_tree = (columns[None, :] >= lengths[:, None]) & (columns[None, :] < lengths[:, None] + n)
    mask = before | (tree_mask[:, inside].permute(1, 0, 2) & in_tree[:, None, :])
    logits = decoder._pass(cache.slot, ids, n, cos[positions][:, None], sin[positions][:, None],
                           where, mask[:, None], hidden)
    cache.lengths = [length + n for length in cache.lengths]
    return logits


@torch.inference_mode()
def keep_paths(cache: RaggedCache, starts: list[int], paths: list[list[int]]) -> None:
    """:func:`keep_path` row by row: row ``b``'s accepted nodes after its root at
    ``starts[b]``."""
    for b, (start, path) in enumerate(zip(starts, paths, strict=True)):
        if path:
            source = torch.tensor([start + node for node in path], device=cache.kv.device)
            for k_cache, v_cache in cache.slot.layers:
                k_cache[b, :, start + 1 : start + 1 + len(path)] = k_cache[b, :, source]
                v_cache[b, :, start + 1 : start + 1 + len(path)] = v_cache[b, :, source]
    cache.lengths = [start + 1 + len(path) for start, path in zip(starts, paths, strict=True)]
