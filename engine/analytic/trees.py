"""The expected yield of a token tree from acceptance by rank and depth (pure Python).

A static tree is a set of paths of ranks: ``(0,)`` the root's first candidate, ``(0, 1)`` that
node's second. With ``acc[d][r]`` the chance that the token the target accepts at depth d + 1
is the rank-r candidate there (Medusa's head accuracies: the first head's top-1, top-2, ...
shares), a node survives when every step of its path was the accepted one:

    survival(r_1 .. r_d) = acc[0][r_1] acc[1][r_2] ... acc[d-1][r_d]
    tokens a cycle       = 1 + the sum of every node's survival

(the ranks at one depth are exclusive, so the path that survives is unique). A chain, every
rank 0, gives the per-position model back: its survival rates are
``acc[0][0], acc[0][0] acc[1][0], ...``. For a budget of N nodes the tree with the most tokens
a cycle is found greedily: a node's survival never exceeds its parent's or its elder
sibling's (when ``acc[d]`` falls with rank), so the best N nodes always form a tree (Sequoia,
Chen et al. 2024, and Medusa's tree search rest on the same argument).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

Path = tuple[int, ...]
# The Medusa heads' tree the engine drafts by default. Medusa's own default for four heads is
# larger; this one keeps 10 nodes (a target pass over 11 tokens): the first head's top 3,
# then the best branch deeper.
MEDUSA_TREE: tuple[Path, ...] = ((0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0),
                                 (0, 0, 1), (0, 1, 0), (0, 0, 0, 0))


def survival(path: Path, acc: Sequence[Sequence[float]]) -> float:
    """The chance that ``path`` is accepted all the way (0 past the depths or ranks given)."""
    out = 1.0
    for depth, rank in enumerate(path):
        if depth >= len(acc) or rank >= len(acc[depth]):
            return 0.0
        out *= acc[depth][rank]
    return out


def expected_tokens(paths: Sequence[Path], acc: Sequence[Sequence[float]]) -> float:
    """Tokens a cycle of the tree ``paths``: its nodes' survival and the target's token."""
    return 1.0 + sum(survival(p, acc) for p in paths)


def best_tree(acc: Sequence[Sequence[float]], budget: int) -> list[Path]:
    """The ``budget`` nodes with the highest survival, grown from the root (each added node's
    first child and next sibling join the frontier); in depth order."""
    chosen: list[Path] = []
    frontier = [(-survival((0,), acc), (0,))]
    seen = {(0,)}
    while frontier and len(chosen) < budget:
        value, path = heapq.heappop(frontier)
        if -value <= 0.0:
            break
        chosen.append(path)
        for nxt in (path + (0,), path[:-1] + (path[-1] + 1,)):
            if nxt not in seen:
                seen.add(nxt)
                heapq.heappush(frontier, (-survival(nxt, acc), nxt))
    return sorted(chosen, key=lambda p: (len(p), p))


def rank_acceptance(walks: Sequence[tuple[Sequence[int | None], int]], depth: int,
                    ranks: int) -> list[list[float]]:
    """``acc[d][r]`` measured: of the cycles whose target reached depth d + 1 along accepted
    tokens, the share whose token there was the rank-r candidate. ``walks``: each cycle's
    ranks (at each depth the target's token reached, its rank among that depth's candidates,
    None past those counted) and how many drafts it accepted."""
    reached = [0] * depth
    hits = [[0] * ranks for _ in range(depth)]
    for walk, accepted in walks:
        for d, rank in enumerate(walk[:depth]):
            reached[d] += 1
            if rank is not None and rank < ranks:
                hits[d][rank] += 1
            if rank is None or d >= accepted:  # the walk stopped here
                break
    return [[h / n if n else 0.0 for h in row] for row, n in zip(hits, reached, strict=True)]


def chain(depth: int) -> list[Path]:
    """A chain of ``depth`` drafts as a tree: every node its parent's first candidate."""
    return [(0,) * d for d in range(1, depth + 1)]


def rank_model(survival: Sequence[float], width: int) -> list[list[float]]:
    """Acceptance by rank and depth from acceptance by position alone, an assumption stated
    wherever it is used: at depth d the top candidate is accepted at the conditional rate
    ``a_d`` and each further one takes the same share of what is left,
    ``acc[d][r] = a_d (1 - a_d)^r`` for r < ``width``."""
    out, before = [], 1.0
    for s in survival:
        a = s / before if before > 0 else 0.0
        out.append([a * (1.0 - a) ** r for r in range(width)])
        before = s
    return out


def sglang_tree(acc: Sequence[Sequence[float]], steps: int, topk: int, draft_tokens: int
                ) -> list[Path]:
    """The tree SGLang's EAGLE verifies for ``--speculative-num-steps`` ``steps`` (its
    depth), ``--speculative-eagle-topk`` ``topk`` (candidates a node) and
    ``--speculative-num-draft-tokens`` ``draft_tokens`` (the tokens verified, the root among
    them): the ``draft_tokens - 1`` nodes with the highest survival within that depth and
    width, as SGLang keeps the best-scoring nodes of its expansion."""
    bounded = [list(row[:topk]) for row in acc[:steps]]
    return best_tree(bounded, draft_tokens - 1)


def parse(text: str) -> list[Path]:
    """A tree as a link writes it: paths separated by ``;``, ranks within a path by ``.``
    (``"0;1;0.0"``: the root's first two candidates and the first one's first), checked: every
    path's parent and elder sibling are in the tree. ValueError says what is wrong."""
    paths = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        try:
            paths.append(tuple(int(r) for r in part.split(".")))
        except ValueError:
            raise ValueError(f"{part!r} is not a path: ranks are whole numbers joined by "
                             "dots, such as 0.1") from None
    if not 1 <= len(paths) <= MAX_NODES:
        raise ValueError(f"a tree has 1 to {MAX_NODES} nodes (got {len(paths)})")
    known = {()}
    for path in sorted(set(paths), key=lambda p: (len(p), p)):
        if min(path) < 0 or path[:-1] not in known or (
                path[-1] > 0 and path[:-1] + (path[-1] - 1,) not in known):
            raise ValueError(f"path {'.'.join(map(str, path))} needs its parent and its elder "
                             "siblings in the tree")
        known.add(path)
    return sorted(set(paths), key=lambda p: (len(p), p))


def text(tree: Sequence[Path] | TreeShape) -> str:
    """A tree as a link writes it: paths (``0;1;0.0``), or SGLang's numbers (``5,4,8``)."""
    if isinstance(tree, TreeShape):
        return tree.text()
    return ";".join(".".join(map(str, p)) for p in tree)


MAX_NODES = 64


@dataclass(frozen=True)
class TreeFigures:
    """The slider page's tree beside the chain that verifies as many tokens a cycle."""

    paths: list[Path]
    survival: list[float]  # each node's, in ``paths``' order
    tokens: float
    cycle_cost: float
    speedup: float
    chain_tokens: float  # a chain of the same number of drafts (as deep as the positions go)
    chain_cycle_cost: float
    chain_speedup: float


def figures(paths: Sequence[Path], acc: Sequence[Sequence[float]], draft_cost,
            verify_cost) -> TreeFigures:
    """``draft_cost(depth)``: the draft's cost of drafting ``depth`` levels (one pass or one
    head a level, each level's nodes together); ``verify_cost(tokens)``: a verification over
    ``tokens`` drafts and the root, in target steps."""
    depth = max(len(p) for p in paths)
    n = len(paths)
    tokens = expected_tokens(paths, acc)
    cost = draft_cost(depth) + verify_cost(n)
    chain_paths = chain(n)
    chain_tokens = expected_tokens(chain_paths, acc)
    chain_cost = draft_cost(n) + verify_cost(n)
    return TreeFigures(list(paths), [survival(p, acc) for p in paths], tokens, cost,
                       tokens / cost, chain_tokens, chain_cost, chain_tokens / chain_cost)


TREE_LIMITS = {"steps": (1, 16), "topk": (1, 16), "draft_tokens": (2, 128)}
# The three numbers within those limits, as the API's schema states them.
TREE_PATTERN = (r"^$|^([1-9]|1[0-6]),([1-9]|1[0-6]),([2-9]|[1-9][0-9]|1[01][0-9]|12[0-8])$")


@dataclass(frozen=True)
class TreeShape:
    """SGLang's three numbers for an EAGLE tree: ``steps`` head passes (its depth), ``topk``
    candidates a node and nodes expanded a depth, ``draft_tokens`` verified (the root among
    them); the plan prices it (engine.planner.tree_plan), the engine drafts it
    (engine.decoder.eagle_tree)."""

    steps: int
    topk: int
    draft_tokens: int

    @property
    def most_nodes(self) -> int:
        """The nodes the steps can draft: topk, then topk children of each of topk nodes."""
        return self.topk + (self.steps - 1) * self.topk ** 2

    def fillable(self) -> TreeShape:
        """This shape if an EAGLE-2 expansion can fill it; ValueError says why not."""
        if not (self.steps >= 1 and self.topk >= 1 and self.draft_tokens >= 2):
            raise ValueError("an EAGLE-2 tree needs steps >= 1, topk >= 1 and draft_tokens "
                             f">= 2 (got {self.text()})")
        if self.draft_tokens - 1 > self.most_nodes:
            raise ValueError(f"{self.steps} steps of topk {self.topk} draft {self.most_nodes} "
                             f"nodes at most; draft_tokens must be at most "
                             f"{self.most_nodes + 1}")
        return self

    @classmethod
    def parse(cls, text: str) -> tuple[TreeShape, list[str]]:
        """``"STEPS,TOPK,DRAFT_TOKENS"``, e.g. ``"5,4,8"``, and what was changed to read it:
        with topk 1 the tree is a chain, so draft_tokens becomes steps + 1 (SGLang refuses
        any other). ValueError for numbers that are not a tree."""
        try:
            steps, topk, tokens = (int(x) for x in text.split(","))
        except ValueError:
            raise ValueError("tree takes STEPS,TOPK,DRAFT_TOKENS, three whole numbers, e.g. "
                             "5,4,8 (SGLang's --speculative-num-steps, --speculative-eagle-topk "
                             "and --speculative-num-draft-tokens)") from None
        shape = cls(steps, topk, tokens)
        for name, (lo, hi) in TREE_LIMITS.items():
            if not lo <= getattr(shape, name) <= hi:
                raise ValueError(f"tree: {name} must be from {lo} to {hi} (got "
                                 f"{getattr(shape, name)})")
        if topk == 1 and tokens != steps + 1:
            return cls(steps, 1, steps + 1), [
                f"tree {text}: with topk 1 the tree is a chain, so draft_tokens is steps + 1 = "
                f"{steps + 1} (SGLang refuses any other)."]
        return shape, []

    def text(self) -> str:
        return f"{self.steps},{self.topk},{self.draft_tokens}"
