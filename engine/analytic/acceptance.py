"""The acceptance estimators: what counted cycles say about alpha (docs/design.md, "The
estimators"). Every engine (ours, a batched one, an n-gram drafter, vLLM's counters) reports
its figures through this module, so they mean the same thing everywhere.

A cycle is two counts: ``proposed``, the draft tokens it put up for verification (a draft
model proposes ``k``; a prompt-lookup drafter 0..k, 0 when it finds no match), and
``accepted``, how many of them verification kept (``0 <= accepted <= proposed``).

- trials of a cycle: ``accepted + (1 if accepted < proposed else 0)``: each accepted draft is
  a success, the first rejected one a failure, and the drafts after it were never tried.
  A cycle that accepted everything it proposed ended without a failure (it was cut at its
  length, not stopped by a rejection); a cycle with no proposal tried nothing.
- counted alpha = accepted / trials: the maximum-likelihood alpha of i.i.d. acceptance cut
  at the proposal's length (Leviathan et al. 2023, section 3.1's alpha).
- draft acceptance rate = accepted / proposed (vLLM's figure).
- mean acceptance length = 1 + accepted / proposing, ``proposing`` the cycles that proposed
  at least one token (vLLM counts a "draft" only when a request had draft tokens). Cycles
  without a proposal still yield one target token each; they are counted apart, as
  :attr:`Tally.proposal_share`.
- acceptance at draft position i (1-based) = cycles that accepted position i / cycles that
  proposed at least i tokens.

"No data" is ``None`` everywhere: an estimator whose denominator is 0 has nothing to say,
and 0.0 or 1.0 would be a claim. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.analytic import theory

DRAFT_SAMPLES = ("probabilistic", "greedy")
"""How a draft model picks its tokens, as vLLM's ``draft_sample_method``: sample from ``q``
and accept with ``min(1, p/q)``, or propose the argmax (``q`` one-hot) and accept with
``p(x)``. Both are lossless; their acceptance rates differ. The engine, the probe, the plan
and the page all take these two names."""

Count = int | float  # vLLM's Prometheus counters arrive as floats


def cycle_trials(proposed: int, accepted: int) -> int:
    """A cycle's trials: its accepted drafts, plus the rejected one if it had one."""
    _check_cycle(proposed, accepted)
    return accepted + (1 if accepted < proposed else 0)


def _check_cycle(proposed: int, accepted: int) -> None:
    if not 0 <= accepted <= proposed:
        raise ValueError(f"a cycle accepts 0..proposed drafts: proposed {proposed}, "
                         f"accepted {accepted}")


def _ratio(num: Count, den: Count) -> float | None:
    return num / den if den else None


def counted_alpha(accepted: Count, trials: Count) -> float | None:
    """accepted / trials; None without trials."""
    return _ratio(accepted, trials)


def draft_acceptance_rate(accepted: Count, proposed: Count) -> float | None:
    """accepted / proposed draft tokens; None when nothing was proposed."""
    return _ratio(accepted, proposed)


def mean_acceptance_length(accepted: Count, proposing: Count) -> float | None:
    """1 + accepted / cycles that proposed something: the tokens such a cycle yields.
    None when no cycle proposed anything."""
    share = _ratio(accepted, proposing)
    return None if share is None else 1.0 + share


def per_position(taken: Sequence[Count], offered: Sequence[Count]) -> list[float | None]:
    """Acceptance at draft positions i = 1..len(taken): ``taken[i-1] / offered[i-1]``, the
    cycles that accepted position i over those that proposed at least i tokens; None at a
    position no cycle reached."""
    if len(taken) != len(offered):
        raise ValueError("one count of cycles that reached each position, please")
    return [_ratio(t, o) for t, o in zip(taken, offered, strict=True)]


@dataclass(frozen=True)
class Tally:
    """The counts every estimator is a ratio of; tallies add up (pool prompts, merge rows).

    ``offered[i-1]``: cycles that proposed at least i tokens; ``taken[i-1]``: cycles that
    accepted draft position i (so also positions 1..i-1).
    """

    cycles: int = 0  # every cycle, with a proposal or without
    proposing: int = 0  # cycles that proposed at least one token
    proposed: int = 0
    accepted: int = 0
    trials: int = 0
    offered: tuple[int, ...] = ()
    taken: tuple[int, ...] = ()

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            cycles=self.cycles + other.cycles,
            proposing=self.proposing + other.proposing,
            proposed=self.proposed + other.proposed,
            accepted=self.accepted + other.accepted,
            trials=self.trials + other.trials,
            offered=_add(self.offered, other.offered),
            taken=_add(self.taken, other.taken),
        )

    @property
    def alpha_counted(self) -> float | None:
        return counted_alpha(self.accepted, self.trials)

    @property
    def draft_acceptance_rate(self) -> float | None:
        return draft_acceptance_rate(self.accepted, self.proposed)

    @property
    def mean_acceptance_length(self) -> float | None:
        return mean_acceptance_length(self.accepted, self.proposing)

    @property
    def proposal_share(self) -> float | None:
        """Share of cycles that proposed anything (``pi`` in docs/design.md, "Drafters")."""
        return _ratio(self.proposing, self.cycles)

    def per_position(self, k: int | None = None) -> list[float | None]:
        """Acceptance at positions 1..k (default: as far as any cycle proposed)."""
        k = len(self.offered) if k is None else k
        pad = (0,) * max(0, k - len(self.offered))
        return per_position((self.taken + pad)[:k], (self.offered + pad)[:k])


def _add(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return tuple(x + y for x, y in zip(a, b, strict=True))


def tally(cycles: Iterable[tuple[int, int]]) -> Tally:
    """The :class:`Tally` of cycles given as ``(proposed, accepted)`` pairs."""
    cycles_n = proposing = proposed_n = accepted_n = trials = 0
    offered: list[int] = []
    taken: list[int] = []
    for proposed, accepted in cycles:
        trials += cycle_trials(proposed, accepted)
        cycles_n += 1
        proposing += proposed > 0
        proposed_n += proposed
        accepted_n += accepted
        if proposed > len(offered):
            offered += [0] * (proposed - len(offered))
            taken += [0] * (proposed - len(taken))
        for i in range(proposed):
            offered[i] += 1
        for i in range(accepted):
            taken[i] += 1
    return Tally(cycles_n, proposing, proposed_n, accepted_n, trials, tuple(offered), tuple(taken))


def tally_histogram(histogram: Sequence[int]) -> Tally:
    """The :class:`Tally` of cycles that each proposed ``k = len(histogram) - 1`` tokens,
    ``histogram[a]`` of them accepting exactly ``a`` (a draft model's cycles)."""
    k = len(histogram) - 1
    if k < 0 or any(n < 0 for n in histogram):
        raise ValueError(f"a histogram counts cycles accepting 0..k drafts, got {list(histogram)}")
    return tally(_expand(histogram))


def _expand(histogram: Sequence[int]) -> Iterable[tuple[int, int]]:
    k = len(histogram) - 1
    for a, n in enumerate(histogram):
        yield from [(k, a)] * n


def acceptance_histogram(cycles: Iterable[tuple[int, int]], k: int) -> list[int]:
    """Cycles that accepted exactly a = 0..k drafts."""
    histogram = [0] * (k + 1)
    for proposed, accepted in cycles:
        _check_cycle(proposed, accepted)
        if accepted > k:
            raise ValueError(f"a cycle accepted {accepted} drafts, more than k = {k}")
        histogram[accepted] += 1
    return histogram


def alpha_from_mean_accepted(mean_accepted: float, k: int) -> float:
    """The alpha whose expected accepted drafts per cycle at ``k`` is ``mean_accepted`` (the
    i.i.d. model, ``theory.expected_accepted``): the fit when only the mean is known."""
    if mean_accepted >= k:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):  # expected_accepted rises with alpha: bisect
        mid = (low + high) / 2
        low, high = (mid, high) if theory.expected_accepted(mid, k) < mean_accepted else (low, mid)
    return (low + high) / 2


# ---- vLLM's counters -------------------------------------------------------------------------
# vLLM counts drafts (cycles with a proposal), draft tokens, accepted tokens and, per 0-based
# position i, the drafts whose token at i was accepted; its k is fixed by the server's config.


def check_vllm_counts(drafts: Count, accepted: Count, per_pos: Sequence[Count]) -> None:
    """``ValueError`` unless the per-position counts can come from real cycles: never
    negative, never above ``drafts``, falling from position 0 on, summing to ``accepted``."""
    reached = [drafts, *per_pos]
    if (min(reached) < 0
            or any(later > earlier for earlier, later in zip(reached, reached[1:], strict=False))
            or (per_pos and sum(per_pos) != accepted)):
        raise ValueError(f"per-position counts {list(per_pos)} do not fit {drafts} drafts and "
                         f"{accepted} accepted tokens")


def per_position_vllm(per_pos: Sequence[Count], drafts: Count) -> list[float | None]:
    """vLLM's per-position acceptance: ``per_pos[i] / drafts`` at position i + 1 (every draft
    proposes k at a draft model; vLLM divides by all drafts for a shorter proposal too)."""
    return [_ratio(x, drafts) for x in per_pos]


def trials_vllm(accepted: Count, drafts: Count, per_pos: Sequence[Count]) -> Count:
    """Trials from the counters at vLLM's fixed ``k = len(per_pos)``: every draft tried one
    more than it accepted, except those that accepted all k (``per_pos[k-1]`` of them)."""
    if not per_pos:
        raise ValueError("trials need the per-position counts (k = 0 has none)")
    return accepted + drafts - per_pos[-1]


def counted_alpha_vllm(accepted: Count, drafts: Count, per_pos: Sequence[Count]) -> float | None:
    """Counted alpha from vLLM's counters; None without per-position counts or drafts."""
    if not per_pos or not drafts:
        return None
    return counted_alpha(accepted, trials_vllm(accepted, drafts, per_pos))


def histogram_vllm(drafts: int, per_pos: Sequence[int]) -> list[int]:
    """Drafts that accepted exactly a = 0..k tokens: ``per_pos[a-1] - per_pos[a]``, with
    ``per_pos[-1]`` read as ``drafts`` and ``per_pos[k]`` as 0."""
    reached = [drafts, *per_pos, 0]
    return [reached[a] - reached[a + 1] for a in range(len(per_pos) + 1)]
