"""A costs file's timings as the costs of decoding steps: forward passes timed at a few
batches (``specscope roofline``, ``specscope costs``, ``specscope sweep --engine vllm
--costs-out``), read into :class:`TimedCosts`, whose ``cycle(batch, k)`` is a cycle's cost in
plain decode steps; the timings' spread (:func:`step_spread`) and what a k = 0 range measured
(:func:`k0_points`).

The plan (:mod:`engine.planner.schedule`) prices its batches with them, and the pure layer's
own readings of a costs file (:mod:`engine.analytic.break_even_alpha`,
:mod:`engine.analytic.machine_overheads`, :mod:`engine.analytic.own_sweeps`) read them the
same way. Pure Python, standard library only.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


class PlanError(ValueError):
    """Inputs a plan cannot be made from; the message says which and why. A costs file that
    gives no step costs is one, so the error is the pure layer's: the planner raises it too."""


COSTS_FILE_VERSION = 3
"""The costs file's format: ``passes`` (forward passes, version 1 and on), ``loop`` (the
decoding loop's own time a step outside the passes, version 2: ``specscope costs``) and
``k0`` (version 3: ``[{"batch", "median_ms"}]``, the step of a k = 0 range of vLLM's schedule
beside the plain step, ``specscope sweep --engine vllm --costs-out``)."""


@dataclass(frozen=True)
class TimedCosts:
    """Forward passes timed at a few batches, in ms: ``target[(B, T)]`` for the target over
    ``T`` new tokens per row and ``draft[B]`` for one draft step; ``loop[(B, k)]``, when the
    costs were measured through the decoding loop, its own time a step outside the passes
    (sampling, the rule, bookkeeping; ``k = 0``: a plain step's).

    Between two timed batches every time is interpolated linearly in B (a pass's time is a
    line in B on either side of the ridge); past the last one it follows the line through the
    last two timed batches (never below the last time); before the first it holds the first.
    ``k_limit`` is the longest draft whose verification (and loop time, if any) was timed."""

    batches: tuple[int, ...]
    target: dict[tuple[int, int], float]
    draft: dict[int, float]
    loop: dict[tuple[int, int], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.batches:
            raise PlanError("the costs hold no timed batches")
        for b in self.batches:
            if (b, 1) not in self.target or b not in self.draft:
                raise PlanError(f"the costs lack the target step or the draft step at batch {b}")
            if self.loop and (b, 0) not in self.loop:
                raise PlanError(f"the costs' loop times lack the plain step (k = 0) at batch {b}")
        for key, ms in [*self.target.items(), *self.draft.items()]:
            if not (isinstance(ms, int | float) and math.isfinite(ms) and ms > 0):
                raise PlanError(f"a pass time must be a positive number (got {ms!r} at {key})")
        for key, ms in self.loop.items():
            if not (isinstance(ms, int | float) and math.isfinite(ms) and ms >= 0):
                raise PlanError(f"a loop time must be a number >= 0 (got {ms!r} at {key})")

    @property
    def k_limit(self) -> int:
        """The largest k whose verification pass (and loop time) was timed at every batch."""
        k = 0
        while all((b, k + 2) in self.target and (not self.loop or (b, k + 1) in self.loop)
                  for b in self.batches):
            k += 1
        return k

    def _at(self, values: Callable[[int], float], batch: int) -> float:
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

    def time_target(self, batch: int, tokens: int) -> float:
        return self._at(lambda b: self.target[(b, tokens)], batch)

    def time_draft(self, batch: int) -> float:
        return self._at(lambda b: self.draft[b], batch)

    def time_loop(self, batch: int, k: int) -> float:
        """The loop's own time a step at ``batch`` and ``k`` (0 without loop times)."""
        return self._at(lambda b: self.loop[(b, k)], batch) if self.loop else 0.0

    def step(self, batch: int) -> float:
        """A plain decode step: the target's pass over one token and the loop around it."""
        return self.time_target(batch, 1) + self.time_loop(batch, 0)

    def cycle(self, batch: int, k: int) -> float:
        """``(k t_q(B, 1) + t_p(B, k + 1) + loop(B, k)) / (t_p(B, 1) + loop(B, 0))``."""
        if not 1 <= k <= self.k_limit:
            raise PlanError(f"verification over {k + 1} tokens was not timed "
                            f"(the costs go up to k = {self.k_limit})")
        return ((k * self.time_draft(batch) + self.time_target(batch, k + 1)
                 + self.time_loop(batch, k)) / self.step(batch))


def timed_costs(passes: Sequence[dict], loop: Sequence[dict] = ()) -> TimedCosts:
    """:class:`TimedCosts` from a costs file's ``passes`` (``specscope roofline``, ``specscope
    costs``: ``{"model": "target" | "draft", "batch", "tokens", "median_ms"}`` each) and
    ``loop`` (``specscope costs``: ``{"batch", "k", "median_ms"}`` each)."""
    target: dict[tuple[int, int], float] = {}
    draft: dict[int, float] = {}
    for i, p in enumerate(passes):
        try:
            model, batch, tokens, ms = p["model"], int(p["batch"]), int(p["tokens"]), \
                p["median_ms"]
        except (KeyError, TypeError, ValueError):
            raise PlanError(f'"passes"[{i}] needs "model", "batch", "tokens" and '
                            '"median_ms"') from None
        if batch < 1 or tokens < 1:
            raise PlanError(f'"passes"[{i}]: batch and tokens must be at least 1')
        if model == "target":
            target[(batch, tokens)] = ms
        elif model == "draft" and tokens == 1:
            draft[batch] = ms
    loop_ms: dict[tuple[int, int], float] = {}
    for i, step in enumerate(loop):
        try:
            batch, k, ms = int(step["batch"]), int(step["k"]), step["median_ms"]
        except (KeyError, TypeError, ValueError):
            raise PlanError(f'"loop"[{i}] needs "batch", "k" and "median_ms"') from None
        if batch < 1 or k < 0:
            raise PlanError(f'"loop"[{i}]: batch must be at least 1 and k at least 0')
        loop_ms[(batch, k)] = ms
    batches = tuple(sorted({b for b, _ in target} | set(draft)))
    return TimedCosts(batches, target, draft, loop_ms)


Spread = Callable[[int, int], float]
"""``spread(batch, k)``: the relative spread (median absolute deviation over the median) of a
measured step at ``batch`` and ``k``; two ks whose speeds differ by less than their spreads
together are a tie."""


def step_spread(steps: Sequence[dict]) -> Spread | None:
    """The spread of a costs file's ``steps`` (``{"batch", "k", "step_ms", "step_mad_ms"}``
    each, ``specscope costs``), held from the nearest timed batch below (the first one before
    it); None when the file records no spread."""
    table: dict[int, dict[int, float]] = {}
    for step in steps:
        try:
            batch, k = int(step["batch"]), int(step["k"])
            ms, mad = float(step["step_ms"]), float(step["step_mad_ms"])
        except (KeyError, TypeError, ValueError):
            continue
        if ms > 0 and math.isfinite(mad) and mad >= 0:
            table.setdefault(batch, {})[k] = mad / ms
    if not table:
        return None
    batches = sorted(table)

    def spread(batch: int, k: int) -> float:
        below = [b for b in batches if b <= batch]
        return table[below[-1] if below else batches[0]].get(k, 0.0)

    return spread


def k0_points(k0: Sequence[dict], costs: TimedCosts) -> list[tuple[int, float]]:
    """A costs file's ``k0`` (``{"batch", "median_ms"}`` each: the step of a k = 0 range) as
    overheads over the costs' plain step at the same batch."""
    points = []
    for i, step in enumerate(k0):
        try:
            batch, ms = int(step["batch"]), float(step["median_ms"])
        except (KeyError, TypeError, ValueError):
            raise PlanError(f'"k0"[{i}] needs "batch" and "median_ms"') from None
        if batch < 1 or not (math.isfinite(ms) and ms > 0):
            raise PlanError(f'"k0"[{i}]: batch must be at least 1 and median_ms above 0')
        points.append((batch, ms / costs.step(batch) - 1.0))
    return points
