"""Drafters: what proposes the tokens a speculative step verifies.

The step (:mod:`engine.decoder.step`) calls a drafter the same way whatever it is::

    drafts = drafter.propose(k, uniforms, clock)    tokens [B, m], q [B, m, V] or None, lengths
    ...the target's pass over [last_b, x_b1..x_bm_b] and the rule...
    drafter.commit(k, accepted, next_tokens, drafts, target_hidden)
    drafter.keep_rows(order)                        rows that finished leave

``q`` is None when every proposal is one-hot (prompt lookup, or a draft model that proposes its
argmax): the rule then accepts ``x`` with probability ``p(x)``. ``target_hidden`` is the
target's final hidden states at the verified positions, for drafters that read them (an EAGLE
head, ``reads_target_hidden``); the drafters here ignore it. A step with ``k = 0`` calls no
``propose`` (its drafts are :func:`no_drafts`) but still ``commit``.

- :class:`NoDraft`: proposes nothing (k = 0 throughout: the target alone).

- :class:`DraftModel`: a small causal LM drafts ``k`` tokens in lockstep for every row, with
  its own ragged KV cache. The cache holds every token of the sequence but what the draft has
  not seen yet (``pending``: the newest token; two after a full acceptance, whose last draft
  never ran through the draft; more after plain steps).
- :class:`Lookup`: prompt lookup (:mod:`engine.decoder.ngram`), 0..k tokens a row from its own
  context; no model at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from engine.decoder.common import Mark
from engine.decoder.ngram import NO_PROPOSAL, PromptLookup, Proposal
from engine.decoder.rows import padded, rows_for
from engine.decoder.sampling import sample_with, warp


@dataclass
class Drafts:
    """One step's proposals for every row.

    ``tokens [B, m]`` (row ``b``'s first ``lengths[b]`` are real, the rest 0), ``q [B, m, V]``
    or None (one-hot), ``lengths [B]`` on the device and as a list, ``finite``: a 0-dim bool
    tensor, False when the draft model's output held NaN or infinity (read with the rule's
    results). ``marks``: a clock mark after each draft pass and after its sampling
    (``2 m`` marks; one after the lookup). ``logits [B, m, V]``: the draft's raw logits when it
    proposed argmaxes and the caller wants distributions (hooks). ``matches``: prompt lookup's
    n-grams, a row each."""

    tokens: torch.Tensor
    q: torch.Tensor | None
    lengths: torch.Tensor
    length_list: list[int]
    finite: torch.Tensor | None
    marks: list[Mark]
    logits: torch.Tensor | None = None
    matches: list[Proposal] | None = None

    @property
    def width(self) -> int:
        return self.tokens.shape[1]


def no_drafts(batch: int, device: torch.device) -> Drafts:
    """A step's drafts when nothing is proposed: ``tokens [B, 0]``, no marks."""
    return Drafts(torch.zeros((batch, 0), dtype=torch.long, device=device), None,
                  torch.zeros(batch, dtype=torch.long, device=device), [0] * batch, None, [])


class Drafter(Protocol):
    """What the step calls (see the module's docstring); built by
    :meth:`engine.decoder.drafter_spec.DrafterSpec.build`."""

    reads_target_hidden: bool

    def uniforms_needed(self, k: int) -> int:
        """Uniforms a row needs before proposing ``k`` tokens (0 unless it samples)."""

    def prefill(self, prompt_ids: list[list[int]], target_hidden: torch.Tensor | None = None
                ) -> None:
        """Every prompt but its last token; ``target_hidden [B, n, H]`` when read."""

    def propose(self, k: int, uniforms: torch.Tensor | None, clock, keep_logits: bool = False
                ) -> Drafts:
        """Up to ``k`` tokens a row; ``uniforms [B, uniforms_needed(k)]``."""

    def commit(self, k: int, accepted: list[int], next_tokens: list[int], drafts: Drafts,
               target_hidden: torch.Tensor | None = None) -> None:
        """After the rule: ``accepted[b]`` of row ``b``'s drafts kept, then its next token."""

    def keep_rows(self, order: list[int]) -> None:
        """Keep the rows at positions ``order``, in that order."""


class NoDraft:
    """The drafter of a run whose k is 0 at every step: it proposes nothing."""

    reads_target_hidden = False

    def __init__(self, device: torch.device):
        self.device = device
        self.batch = 0

    def uniforms_needed(self, k: int) -> int:
        return 0

    def prefill(self, prompt_ids: list[list[int]], target_hidden: torch.Tensor | None = None
                ) -> None:
        self.batch = len(prompt_ids)

    def propose(self, k: int, uniforms: torch.Tensor | None, clock, keep_logits: bool = False
                ) -> Drafts:
        return no_drafts(self.batch, self.device)

    def commit(self, k: int, accepted: list[int], next_tokens: list[int], drafts: Drafts,
               target_hidden: torch.Tensor | None = None) -> None:
        pass

    def keep_rows(self, order: list[int]) -> None:
        self.batch = len(order)


def choose(logits: torch.Tensor, greedy: bool, sampling: dict, uniforms: torch.Tensor | None,
           i: int, winners: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Draft step ``i``'s tokens ``[B]`` from ``logits [B, V]`` and the row kept for ``q``: the
    argmax (its logit goes to ``winners``, for the finiteness check) or a draw from the warped
    distribution with each row's own uniform ``uniforms[:, i]``, on the device."""
    if greedy:
        token = logits.argmax(dim=-1)
        winners.append(logits.gather(-1, token[:, None]))
        return token, logits
    row = warp(logits, **sampling)
    return sample_with(row, uniforms[:, i]), row


def distributions(rows: list[torch.Tensor], winners: list[torch.Tensor], greedy: bool,
                  keep_logits: bool, real: torch.Tensor | None = None):
    """``(q [B, k, V] or None, logits or None, finite)`` from the steps' rows: greedy drafts
    have no ``q`` (one-hot), and their raw logits are kept when asked; ``finite`` checks the
    argmax logits (a NaN or +inf wins an argmax) or every probability, over the rows ``real``
    (default all)."""
    stacked = torch.stack(rows, dim=1)  # [B, k, V]
    pick = slice(None) if real is None else real
    if greedy:
        finite = torch.isfinite(torch.cat(winners, dim=1)[pick]).all()
        return None, stacked if keep_logits else None, finite
    return stacked, None, torch.isfinite(stacked[pick]).all()


class DraftModel:
    """A draft model's lockstep drafting for ``B`` rows."""

    reads_target_hidden = False

    def __init__(self, model, vocab: int, capacity: int, batch: int, k_max: int,
                 device: torch.device, sampling: dict, greedy: bool):
        """``k_max``: the most tokens a step drafts; ``sampling``: ``warp``'s temperature,
        top_k and top_p; ``greedy``: propose argmaxes (temperature 0, or
        ``draft_sample="greedy"``)."""
        self.rows = rows_for(model, capacity, batch, k_max + 1)
        self.vocab, self.device = vocab, device
        self.sampling, self.greedy = sampling, greedy
        self.pending: list[list[int]] = []

    def uniforms_needed(self, k: int) -> int:
        """Uniforms a row needs before proposing: one a drafted token when it samples."""
        return 0 if self.greedy else k

    def prefill(self, prompt_ids: list[list[int]], target_hidden: torch.Tensor | None = None
                ) -> None:
        prefixes = [ids[:-1] for ids in prompt_ids]  # the cache holds all but the newest
        if max(map(len, prefixes)) > 0:
            self.rows.run(padded(prefixes, self.device), [len(p) for p in prefixes], 1)
        self.pending = [[ids[-1]] for ids in prompt_ids]

    @torch.inference_mode()
    def propose(self, k: int, uniforms: torch.Tensor | None, clock, keep_logits: bool = False
                ) -> Drafts:
        """``k`` lockstep passes; ``uniforms [B, k]`` draw the tokens when sampling."""
        batch = len(self.pending)
        valid = [len(p) for p in self.pending]
        ids = padded(self.pending, self.device)
        tokens, rows, marks, winners = [], [], [], []
        for i in range(k):
            logits = self.rows.run(ids, valid, 1)[:, -1, : self.vocab]  # [B, V]
            marks.append(clock.mark())
            token, row = choose(logits, self.greedy, self.sampling, uniforms, i, winners)
            marks.append(clock.mark())
            tokens.append(token)
            rows.append(row)
            ids, valid = token[:, None], [1] * batch
        lengths = torch.full((batch,), k, dtype=torch.long, device=self.device)
        q, logits, finite = distributions(rows, winners, self.greedy, keep_logits)
        return Drafts(torch.stack(tokens, dim=1), q, lengths, [k] * batch, finite, marks,
                      logits)

    def commit(self, k: int, accepted: list[int], next_tokens: list[int], drafts: Drafts,
               target_hidden: torch.Tensor | None = None) -> None:
        """After the rule: each row's cache back to its accepted prefix. ``k = 0`` (a plain
        step): the draft saw nothing, so the target's token waits in ``pending``."""
        if k == 0:
            for pending, token in zip(self.pending, next_tokens, strict=True):
                pending.append(token)
            return
        # The cache holds ..., pending, x_1..x_{k-1}: keep ..., x_1..x_n; after a full
        # acceptance it never ran on x_k, so x_k waits with t for the next pass.
        self.rows.rollback([k - 1 - n if n < k else 0 for n in accepted])
        last_drafts = drafts.tokens[:, -1].tolist() if k in accepted else None
        self.pending = [[token] if n < k else [last_drafts[b], token]
                        for b, (n, token) in enumerate(zip(accepted, next_tokens, strict=True))]

    def keep_rows(self, order: list[int]) -> None:
        self.rows.keep_rows(order)
        self.pending = [self.pending[i] for i in order]


class Lookup:
    """Prompt lookup for ``B`` rows, each over its own context (prompt and output so far)."""

    reads_target_hidden = False

    def __init__(self, lookup: PromptLookup, device: torch.device):
        self.lookup, self.device = lookup, device
        self.contexts: list[list[int]] = []

    def uniforms_needed(self, k: int) -> int:
        return 0

    def prefill(self, prompt_ids: list[list[int]], target_hidden: torch.Tensor | None = None
                ) -> None:
        self.contexts = [list(ids) for ids in prompt_ids]

    def propose(self, k: int, uniforms: torch.Tensor | None, clock, keep_logits: bool = False
                ) -> Drafts:
        matches = [self.lookup.propose(context, k) if k else NO_PROPOSAL
                   for context in self.contexts]
        lengths = [len(m.tokens) for m in matches]
        marks = [clock.mark()]
        tokens = padded([m.tokens for m in matches], self.device, width=max(lengths))
        return Drafts(tokens, None, torch.tensor(lengths, device=self.device), lengths, None,
                      marks, matches=matches)

    def commit(self, k: int, accepted: list[int], next_tokens: list[int], drafts: Drafts,
               target_hidden: torch.Tensor | None = None) -> None:
        for b, (n, token) in enumerate(zip(accepted, next_tokens, strict=True)):
            kept = drafts.matches[b].tokens[:n] if drafts.matches is not None else []
            self.contexts[b] += [*kept, token]

    def keep_rows(self, order: list[int]) -> None:
        self.contexts = [self.contexts[i] for i in order]
