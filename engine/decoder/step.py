"""One speculative step for every row of a batch, whatever the batch size and the drafter.

    draft:   the drafter proposes m_b in 0..k tokens a row          (k = 0: a plain step)
    verify:  ONE target pass over [last_b, x_b1..x_bm_b] for every row
             (n, t) = verify_batch(x, q, p, m, u)                    the rule, all rows at once
    read:    n, t and a finiteness flag in one host read             the step's one wait
    commit:  each row's target cache back to its accepted prefix; the drafter's too

The single stream (:mod:`engine.decoder.speculative`) is a batch of one through the same
step, and the batched loop (:mod:`engine.decoder.batched`) is ``B`` rows through it, so "a row
equals itself alone" holds by construction (up to the ~1e-6 rounding by which batched logits
differ from one row's).

Random numbers: row ``b`` draws its step's uniforms in one call on its own generator (a
sampling draft model: ``k`` for its tokens, then ``k + 1`` for the rule; otherwise ``m_b + 1``
for the rule; none at temperature 0), in the order the single stream always drew them.

Timing: a clock mark after each draft pass, its sampling, the target pass, the rule and the
commit; the marks are read after the rule's host read (on CUDA they are events, so the host
never waits for the device in between).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.decoder.common import Clock
from engine.decoder.drafters import Drafter, no_drafts
from engine.decoder.rows import padded, rows_for
from engine.decoder.sampling import greedy as greedy_probs
from engine.decoder.sampling import row_uniforms, warp
from engine.decoder.verify import verify_batch, verify_batch_greedy

NOT_FINITE = ("the model produced probabilities that are not finite numbers (NaN or infinity); "
              "try another temperature or a full-precision dtype")


@dataclass(frozen=True)
class Sampling:
    """The batch's sampling settings: ``warp``'s temperature, top_k and top_p, and whether
    the target is greedy (temperature 0)."""

    temperature: float
    top_k: int
    top_p: float
    greedy: bool

    def warp(self, logits: torch.Tensor) -> torch.Tensor:
        return warp(logits, self.temperature, self.top_k, self.top_p)


@dataclass
class StepTimes:
    """Milliseconds of one step: each draft pass, the drafter's other work (sampling between
    the passes, or prompt lookup's search), the target pass, the rule (with the host read)
    and the commit (rollbacks and the drafter's bookkeeping)."""

    draft_pass_ms: list[float]
    draft_other_ms: float
    target_ms: float
    rule_ms: float
    commit_ms: float

    @property
    def draft_ms(self) -> float:
        return sum(self.draft_pass_ms) + self.draft_other_ms

    @property
    def verify_ms(self) -> float:
        return self.target_ms + self.rule_ms + self.commit_ms

    @property
    def total_ms(self) -> float:
        return self.draft_ms + self.verify_ms


@dataclass
class StepResult:
    """What one step did, per row in batch order. ``q [B, m, V]`` and ``p [B, m + 1, V]``
    (row ``b``'s real positions first) and ``overlap`` (``sum_x min(p, q)`` at each verified
    position) only when the stepper was asked for distributions."""

    k: int
    drafts: list[list[int]]
    n_accepted: list[int]
    next_tokens: list[int]
    times: StepTimes
    draft_step_ms: list[float]  # each drafted token's pass and sampling (the lookup: one)
    q: torch.Tensor | None = None
    p: torch.Tensor | None = None
    overlap: list[list[float]] | None = None
    matches: list | None = None  # prompt lookup's n-gram per row


class Stepper:
    """The rows of a batch between steps: the target's cache, each row's newest token (in
    neither cache yet), each row's generator, and the drafter."""

    def __init__(self, pair, drafter: Drafter, sampling: Sampling,
                 generators: list[torch.Generator], capacity: int, k_max: int, clock: Clock,
                 distributions: bool = False):
        """``k_max``: the most drafts a step verifies; ``distributions``: keep ``q``, ``p``
        and the overlaps in every result (the single stream's events and the hooks of tests
        and probes)."""
        self.pair, self.drafter, self.sampling = pair, drafter, sampling
        self.generators = list(generators)
        self.clock, self.distributions = clock, distributions
        self.device, self.vocab = pair.device, pair.shared_vocab_size
        self.target = rows_for(pair.target, capacity, len(self.generators), k_max + 1)
        self.last: list[int] = []
        # A drafter that reads the target's final hidden states (an EAGLE head) gets them
        # from every target pass: [B, n, H] in the pass's input order.
        self.wants_hidden = drafter.reads_target_hidden

    @torch.inference_mode()
    def prefill(self, prompt_ids: list[list[int]]) -> None:
        """Every prompt but its last token into the caches."""
        prefixes = [ids[:-1] for ids in prompt_ids]
        hidden = [] if self.wants_hidden else None
        if max(map(len, prefixes)) > 0:
            self.target.run(padded(prefixes, self.device), [len(p) for p in prefixes], 1,
                            hidden)
        # [B, n, H] over each prompt but its last token, for a drafter that reads it
        self.drafter.prefill(prompt_ids, target_hidden=hidden[0] if hidden else None)
        self.last = [ids[-1] for ids in prompt_ids]

    def keep_rows(self, order: list[int]) -> None:
        """Keep the rows at positions ``order``, in that order."""
        self.target.keep_rows(order)
        self.drafter.keep_rows(order)
        self.last = [self.last[i] for i in order]
        self.generators = [self.generators[i] for i in order]

    @torch.inference_mode()
    def step(self, k: int) -> StepResult:
        clock, device, sampling = self.clock, self.device, self.sampling
        batch = len(self.last)
        start = clock.mark()
        drafts, u_rule = no_drafts(batch, device), None
        if k > 0:
            before = self.drafter.uniforms_needed(k)
            u_draft = None
            if before and not sampling.greedy:  # the step's uniforms in one call a row
                u = row_uniforms(self.generators, [before + k + 1] * batch, before + k + 1,
                                 device)
                u_draft, u_rule = u[:, :before], u[:, before:]
            drafts = self.drafter.propose(k, u_draft, clock, keep_logits=self.distributions)
        lengths, width, m, tokens = drafts.length_list, drafts.width, drafts.lengths, drafts.tokens
        if u_rule is None and not sampling.greedy:
            u_rule = row_uniforms(self.generators, [n + 1 for n in lengths], width + 1, device)

        last = torch.tensor(self.last, device=device)[:, None]
        ids = torch.cat([last, tokens], dim=1)  # [B, width + 1]
        hidden = [] if self.wants_hidden else None
        logits = self.target.run(ids, [n + 1 for n in lengths], width + 1, hidden)
        logits = logits[..., : self.vocab]
        if min(lengths) < width:  # rows' real positions come last: put them first
            shift = width - m
            index = (torch.arange(width + 1, device=device) + shift[:, None]).clamp_(max=width)
            logits = logits[torch.arange(batch, device=device)[:, None], index]
        after_target = clock.mark()

        p = None
        if sampling.greedy:
            targets = logits.argmax(dim=-1)  # [B, width + 1]
            finite = torch.isfinite(logits.gather(-1, targets[..., None])).all()
            n, next_tokens = verify_batch_greedy(tokens, targets, m)
            if self.distributions:
                p = greedy_probs(logits)
        else:
            p = sampling.warp(logits)  # [B, width + 1, V]
            finite = torch.isfinite(p).all()
            n, next_tokens = verify_batch(tokens, drafts.q, p, m, u_rule)
        if drafts.finite is not None:
            finite = finite & drafts.finite
        q = self._q(drafts) if self.distributions else None
        overlap = self._overlap(tokens, q, p, width) if self.distributions else None
        # The step's one wait for the device: everything the host needs, in one read.
        parts = [n.double(), next_tokens.double(), finite.double().view(1)]
        if overlap is not None:
            parts.append(overlap.double().flatten())
        values = torch.cat(parts).tolist()
        if not values[2 * batch]:
            raise ValueError(NOT_FINITE)
        accepted = [int(x) for x in values[:batch]]
        next_list = [int(x) for x in values[batch : 2 * batch]]
        after_rule = clock.mark()

        # The target's cache holds ..., last, x_1..x_m of each row; keep ..., last, x_1..x_n.
        self.target.rollback([mb - nb for mb, nb in zip(lengths, accepted, strict=True)])
        self.drafter.commit(k, accepted, next_list, drafts,
                            target_hidden=hidden[0] if hidden else None)
        self.last = next_list
        end = clock.mark()

        spans = clock.spans([start, *drafts.marks, after_target, after_rule, end])
        drafted, (target_ms, rule_ms, commit_ms) = spans[: len(drafts.marks)], spans[-3:]
        if drafts.matches is None:  # a pass, then its sampling
            passes, other = drafted[0::2], drafted[1::2]
            step_ms = [a + b for a, b in zip(passes, other, strict=True)]
        else:
            passes, other, step_ms = [], drafted, drafted
        times = StepTimes(passes, sum(other), target_ms, rule_ms, commit_ms)
        proposals = tokens.tolist() if width else [[] for _ in range(batch)]
        return StepResult(
            k=k, drafts=[row[:mb] for row, mb in zip(proposals, lengths, strict=True)],
            n_accepted=accepted, next_tokens=next_list, times=times, draft_step_ms=step_ms,
            q=q, p=p, overlap=self._rows_overlap(values, batch, width, lengths, accepted)
            if overlap is not None else None,
            matches=drafts.matches,
        )

    def _q(self, drafts) -> torch.Tensor:
        """``q [B, m, V]`` for hooks: one-hot where the drafter proposed argmaxes or looked
        the tokens up."""
        if drafts.q is not None:
            return drafts.q
        if drafts.logits is not None:
            return greedy_probs(drafts.logits)
        one_hot = torch.zeros((*drafts.tokens.shape, self.vocab), device=self.device)
        return one_hot.scatter_(-1, drafts.tokens[..., None], 1.0)

    def _overlap(self, tokens, q, p, width) -> torch.Tensor:
        """``sum_x min(p, q)`` at every drafted position, ``[B, width]``."""
        if width == 0:
            return torch.zeros((tokens.shape[0], 0), device=self.device)
        return torch.minimum(p[:, :width], q).sum(dim=-1)

    @staticmethod
    def _rows_overlap(values, batch, width, lengths, accepted) -> list[list[float]]:
        """Each row's overlaps at its verified positions: the accepted ones and the
        rejected one."""
        flat = values[2 * batch + 1 :]
        rows = [flat[b * width : (b + 1) * width] for b in range(batch)]
        return [row[: n + (n < mb)] for row, n, mb in zip(rows, accepted, lengths, strict=True)]
