"""The drafter as a value: which drafter a run uses and its options, built into the object the
step calls (:class:`engine.decoder.drafters.Drafter`) once the rows are known.

    DrafterSpec()                           the pair's draft model (kind "model")
    DrafterSpec.ngram(PromptLookup(2, 4))   prompt lookup with these n-gram bounds
    DrafterSpec.eagle(head)                 an EAGLE head loaded for the pair's target
    DrafterSpec.medusa(heads)               Medusa heads loaded for the pair's target
    DrafterSpec.medusa(heads, tree)         the same heads drafting a static token tree
                                            (paths of ranks, engine.analytic.trees) each cycle;
    DrafterSpec(tree=paths)                 the draft model drafting one
    DrafterSpec.eagle(head, TreeShape(...))  the EAGLE head drafting EAGLE-2 trees of SGLang's
                                            shape (steps, topk, draft tokens)

The kinds are :data:`engine.analytic.drafters.DRAFTER_NAMES`, the one list every command,
route and form offers. A spec is checked against a pair once (:meth:`DrafterSpec.check`), and
k = 0 throughout needs no drafter at all: :meth:`DrafterSpec.build` then gives
:class:`engine.decoder.drafters.NoDraft`, so the step never branches on a missing drafter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.analytic import trees
from engine.analytic.drafters import DRAFTER_NAMES
from engine.analytic.trees import TreeShape
from engine.decoder.drafters import Drafter, DraftModel, Lookup, NoDraft
from engine.decoder.eagle import Eagle, EagleHead, load_head_for
from engine.decoder.medusa import Medusa, MedusaHeads, load_heads_for
from engine.decoder.ngram import PromptLookup


@dataclass(frozen=True)
class DrafterSpec:
    """``kind``: one of ``DRAFTER_NAMES``; ``lookup``: prompt lookup's n-gram bounds (kind
    "ngram"); ``head``: the loaded head of kind "eagle"
    (:func:`engine.decoder.eagle.load_head_for`) or "medusa"
    (:func:`engine.decoder.medusa.load_heads_for`); ``tree``: a token tree, paths of ranks
    (the draft model, the Medusa heads) or the EAGLE head's :class:`TreeShape` (None: a chain
    of k drafts)."""

    kind: str = "model"
    lookup: PromptLookup = field(default_factory=PromptLookup)
    head: EagleHead | MedusaHeads | None = field(default=None, compare=False, repr=False)
    tree: tuple[tuple[int, ...], ...] | TreeShape | None = None

    @classmethod
    def ngram(cls, lookup: PromptLookup | None = None) -> DrafterSpec:
        return cls("ngram", lookup or PromptLookup())

    @classmethod
    def eagle(cls, head: EagleHead, tree: TreeShape | None = None) -> DrafterSpec:
        return cls("eagle", head=head, tree=tree)

    @classmethod
    def medusa(cls, heads: MedusaHeads, tree=None) -> DrafterSpec:
        return cls("medusa", head=heads, tree=None if tree is None else tuple(map(tuple, tree)))

    @property
    def depth(self) -> int:
        """A tree's depth: the positions one of its cycles can accept (0: no tree)."""
        if isinstance(self.tree, TreeShape):
            return self.tree.steps
        return max(map(len, self.tree)) if self.tree else 0

    @property
    def tree_text(self) -> str:
        """The tree as a link writes it: paths (``0;1;0.0``) or SGLang's numbers (``5,4,8``);
        "" for a chain."""
        return trees.text(self.tree) if self.tree else ""

    def lookahead(self, k: int) -> int:
        """Positions past the prompt a cycle needs: the tree's nodes and the target's
        token, or k drafts."""
        if isinstance(self.tree, TreeShape):
            return self.tree.draft_tokens
        return len(self.tree) + 1 if self.tree else k

    def check(self, pair, k_max: int) -> DrafterSpec:
        """Raise ``ValueError`` with a readable message when this drafter cannot run on
        ``pair`` (a :class:`engine.decoder.loading.ModelPair`) with drafts up to ``k_max``."""
        if self.kind not in DRAFTER_NAMES:
            raise ValueError(f"drafter must be one of {', '.join(DRAFTER_NAMES)}, "
                             f"got {self.kind!r}")
        if self.tree and (self.kind, isinstance(self.tree, TreeShape)) not in (
                ("medusa", False), ("model", False), ("eagle", True)):
            raise ValueError("a token tree is drafted by the draft model or the Medusa heads "
                             "(paths of ranks, such as 0;1;0.0) or the EAGLE head (SGLang's "
                             f"steps,topk,draft tokens, such as 5,4,8), not by {self.kind!r} "
                             f"with {self.tree_text!r}")
        if isinstance(self.tree, TreeShape):
            self.tree.fillable()
        if self.kind == "ngram":
            self.lookup.validate()
        elif self.kind == "eagle" and self.head is None:
            raise ValueError("the EAGLE drafter needs a head: load one for the target "
                             "(models/eagle is the shipped pair's)")
        elif self.kind == "medusa" and self.head is None:
            raise ValueError("the Medusa drafter needs heads: load them for the target "
                             "(models/medusa are the shipped pair's)")
        elif self.kind == "medusa" and self.depth > self.head.num_heads:
            raise ValueError(f"the tree is {self.depth} deep; the Medusa heads guess "
                             f"{self.head.num_heads} tokens at most")
        elif self.kind == "medusa" and not self.tree and k_max > self.head.num_heads:
            raise ValueError(f"the Medusa heads guess at most {self.head.num_heads} tokens "
                             f"(one a head): k must be at most {self.head.num_heads}, got "
                             f"{k_max}")
        elif self.kind == "model" and k_max > 0 and pair.draft is None:
            raise ValueError("speculative decoding needs a draft model; this pair has none "
                             "(k = 0 on every step decodes with the target alone; prompt "
                             "lookup needs none, nor does an EAGLE head)")
        return self

    def models(self, pair, k_max: int) -> list[tuple[str, object]]:
        """``(name, model)`` of every model a run with this drafter puts through a forward
        pass of the engine's (the EAGLE head runs its own)."""
        models = [(pair.target_name or "the target", pair.target)]
        if self.kind == "model" and k_max > 0:
            models.append((pair.draft_name or "the draft", pair.draft))
        return models

    def build(self, pair, capacity: int, batch: int, k_max: int, device: torch.device,
              sampling: dict, greedy: bool) -> Drafter:
        """The drafter for ``batch`` rows of at most ``capacity`` tokens, drafting at most
        ``k_max`` a step; ``sampling``: ``warp``'s temperature, top_k and top_p; ``greedy``:
        propose argmaxes."""
        if k_max == 0:
            return NoDraft(device)
        if self.kind == "ngram":
            return Lookup(self.lookup, device)
        if self.kind == "eagle":
            return Eagle(self.head, pair.shared_vocab_size, capacity, batch, device, sampling,
                         greedy)
        if self.kind == "medusa":
            return Medusa(self.head, pair.shared_vocab_size, batch, device, sampling, greedy)
        return DraftModel(pair.draft, pair.shared_vocab_size, capacity, batch, k_max, device,
                          sampling, greedy)


DRAFT_MODEL = DrafterSpec()
"""The default drafter: the pair's own draft model."""


def kind_of(lookup: PromptLookup | None, eagle: object | None = None,
            medusa: object | None = None) -> str:
    """The drafter a record names by its options: prompt lookup's bounds (``lookup``), an
    EAGLE head's folder (``eagle``) or Medusa heads' (``medusa``), else the draft model."""
    named = [kind for kind, option in (("ngram", lookup is not None), ("eagle", bool(eagle)),
                                       ("medusa", bool(medusa))) if option]
    if len(named) > 1:
        raise ValueError(f"one drafter at a time, not {' and '.join(named)}")
    return named[0] if named else "model"


def spec_for(pair, lookup: PromptLookup | None = None, eagle: str | None = None,
             medusa: str | None = None) -> DrafterSpec:
    """The spec a record's options name, a head in folder ``eagle`` or ``medusa`` loaded for
    ``pair``."""
    kind = kind_of(lookup, eagle, medusa)
    if kind == "ngram":
        return DrafterSpec.ngram(lookup)
    if kind == "eagle":
        return DrafterSpec.eagle(load_head_for(pair, eagle))
    if kind == "medusa":
        return DrafterSpec.medusa(load_heads_for(pair, medusa))
    return DRAFT_MODEL


def options_of(args, kind: str | None = None) -> dict:
    """``lookup``, ``eagle`` and ``medusa``: the options of drafter ``kind`` (default
    ``args.drafter``) that command-line arguments (``engine.cli_options.add_drafter_options``)
    name, the others None; as :func:`spec_for` and the records take them."""
    kind = kind or args.drafter
    lookup = (PromptLookup(args.prompt_lookup_min, args.prompt_lookup_max).validate()
              if kind == "ngram" else None)
    return {"lookup": lookup, "eagle": args.eagle if kind == "eagle" else None,
            "medusa": args.medusa if kind == "medusa" else None}
