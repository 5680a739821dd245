"""The break-even alpha: the acceptance rate below which drafting k tokens a cycle loses to
plain decoding at a batch, on measured step costs.

A cycle of k drafts yields ``E_k(alpha) = (1 - alpha^(k+1)) / (1 - alpha)`` tokens per row
(``k + 1`` at alpha = 1) and costs ``cycle(B, k)`` plain decode steps at batch B. Speculation
pays while ``E_k(alpha) > cycle(B, k)``; ``E_k`` rises from 1 (alpha = 0) to ``k + 1``
(alpha = 1), so the break-even alpha is the one root of ``E_k(alpha) = cycle(B, k)`` in
[0, 1]: 0 when the cycle costs no more than a plain step (any alpha pays), none when it
costs ``k + 1`` steps or more (no alpha pays).

The costs are vLLM's own, as ``specscope sweep --engine vllm --costs-out`` writes them
(``{"method": "vllm-steps", "passes": [{model, batch, tokens, median_ms}, ...]}``):

    cycle(B, k) = (k t_draft(B, 1) + t_target(B, k + 1)) / t_target(B, 1)

with every time linear in B between the timed batches, held below the first, and following
the last two timed batches past the last (never below the last time), as the plan reads
them. "Plain decoding" is the target's step over one token: a server with no speculative
config. A k = 0 range of a schedule may cost more than that (vLLM keeps its speculative
machinery running); a costs file that prices it is not read here, so a break-even at such a
batch is the one against no speculative config. Standard library only.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BISECTION_STEPS = 60  # 2^-60: far below any alpha a counter can resolve


class CostsError(ValueError):
    """A costs file that does not give the step times this needs; says why."""


def expected_tokens(alpha: float, k: int) -> float:
    """``1 + alpha + ... + alpha^k``: tokens per row per cycle under i.i.d. acceptance."""
    return sum(alpha**i for i in range(k + 1))


def break_even_alpha(cycle: float, k: int) -> float | None:
    """The alpha in [0, 1] with ``E_k(alpha) = cycle``; 0.0 when ``cycle <= 1`` (every alpha
    pays), None when ``cycle >= k + 1`` (none does)."""
    if k < 1:
        raise ValueError(f"a break-even alpha needs k >= 1 (got k = {k}): k = 0 is off")
    if not math.isfinite(cycle) or cycle <= 0:
        raise ValueError(f"a cycle cost must be a positive number of steps (got {cycle!r})")
    if cycle <= 1.0:
        return 0.0
    if cycle >= k + 1:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) < cycle:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class StepCosts:
    """Timed passes in ms: ``target[(B, T)]`` over ``T`` new tokens per row, ``draft[B]`` one
    draft step, at the timed batches."""

    batches: tuple[int, ...]
    target: Mapping[tuple[int, int], float]
    draft: Mapping[int, float]

    @property
    def k_limit(self) -> int:
        """The largest k whose verification (``k + 1`` tokens) was timed at every batch."""
        k = 0
        while all((b, k + 2) in self.target for b in self.batches):
            k += 1
        return k

    def _at(self, values, batch: int) -> float:
        bs = self.batches
        if batch <= bs[0] or len(bs) == 1:
            return values(bs[0])
        i = bisect.bisect_left(bs, batch)
        if i < len(bs) and bs[i] == batch:
            return values(batch)
        lo, hi = (bs[i - 1], bs[i]) if i < len(bs) else (bs[-2], bs[-1])
        y_lo, y_hi = values(lo), values(hi)
        y = y_lo + (y_hi - y_lo) * (batch - lo) / (hi - lo)
        return y if i < len(bs) else max(y, y_hi)

    def cycle(self, batch: int, k: int) -> float:
        """``(k t_draft(B) + t_target(B, k + 1)) / t_target(B, 1)``, in plain steps."""
        if not 1 <= k <= self.k_limit:
            raise CostsError(f"the costs do not time a verification over {k + 1} tokens "
                             f"(they go up to k = {self.k_limit})")
        plain = self._at(lambda b: self.target[(b, 1)], batch)
        verify = self._at(lambda b: self.target[(b, k + 1)], batch)
        draft = self._at(lambda b: self.draft[b], batch)
        return (k * draft + verify) / plain

    def break_even(self, batch: int, k: int) -> float | None:
        """The break-even alpha of k at ``batch`` (see :func:`break_even_alpha`)."""
        return break_even_alpha(self.cycle(batch, k), k)


def step_costs(data: object) -> StepCosts:
    """:class:`StepCosts` from a costs file's JSON (``passes``); :class:`CostsError` says
    what is missing."""
    passes = data.get("passes") if isinstance(data, dict) else None
    if not isinstance(passes, list) or not passes:
        raise CostsError('this is not a costs file: it has no "passes" (write one with '
                         "specscope sweep --engine vllm --policies off,2,4 --costs-out FILE)")
    target: dict[tuple[int, int], float] = {}
    draft: dict[int, float] = {}
    for i, p in enumerate(passes):
        try:
            model, batch, tokens, ms = (p["model"], int(p["batch"]), int(p["tokens"]),
                                        float(p["median_ms"]))
        except (KeyError, TypeError, ValueError):
            raise CostsError(f'"passes"[{i}] needs "model", "batch", "tokens" and a number '
                             '"median_ms"') from None
        if batch < 1 or tokens < 1 or not (math.isfinite(ms) and ms > 0):
            raise CostsError(f'"passes"[{i}]: batch and tokens must be at least 1 and '
                             "median_ms a positive number")
        if model == "target":
            target[(batch, tokens)] = ms
        elif model == "draft" and tokens == 1:
            draft[batch] = ms
    batches = tuple(sorted({b for b, _ in target} | set(draft)))
    for b in batches:
        if (b, 1) not in target or b not in draft:
            raise CostsError(f"the costs lack the target's plain step or the draft step at "
                             f"batch {b}")
    return StepCosts(batches, target, draft)


def planned_k(ranges: Sequence[Sequence[int]], batch: int, k_cap: int | None = None) -> int:
    """The k vLLM uses at ``batch`` under ``[[lo, hi, k], ...]``: the range holding it; in a
    gap, the previous range's k; past the last range, the last k; before the first, 0; capped
    at ``num_speculative_tokens`` (vLLM's ``build_dynamic_sd_schedule_lookup``)."""
    k: int | None = None
    for lo, hi, rk in sorted(tuple(r) for r in ranges):
        if lo <= batch:
            k = rk
        if lo <= batch <= hi:
            break
    k = k if k is not None else 0
    return min(k, k_cap) if k_cap is not None else k
