"""A batch-size schedule for speculative decoding: the draft length k to use at each batch.

All ``B`` rows of a batch draft and verify in lockstep, and each row accepts its own prefix,
so the batch advances at a mean of ``E_k`` tokens per row per cycle (docs/design.md, "The
batch-size schedule"). Against plain decoding at the same batch the
throughput speedup is

    S(B, k) = E_k / cycle(B, k),   cycle(B, k) = k c(B) + v(B, k)   (target steps at batch B)

with ``S(B, 0) = 1``: k = 0 is speculation off. For a traffic mix of domains ``d`` with
weights ``w_d`` (summing to 1) and acceptance rates ``alpha_d``, the rows of a batch come
from every domain, so the tokens per row per cycle are ``sum_d w_d E_k(alpha_d)``: the mean
of ``E_k``, which is not ``E_k`` of the mean alpha (``E_k`` is convex in alpha).

:func:`plan` picks, for every batch ``B`` in ``1..max_num_seqs`` that fits in memory, the k in
``0..k_max`` with the highest ``S(B, k)`` (ties go to the smaller k), merges neighbouring
batches with the same k into inclusive ranges ``[lo, hi, k]`` (vLLM's
``num_speculative_tokens_per_batch_size``), and reports what each range gains over speculation
off and over the best fixed k.

The costs come from a function ``cycle(batch, k)``: :func:`roofline_cycle` (a hardware and
model preset, :mod:`engine.analytic.roofline`) or :class:`TimedCosts` (forward passes timed on
real hardware, ``specscope roofline``). Pure Python, standard library only.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from engine.analytic import positions
from engine.analytic.break_even import costs
from engine.analytic.passes import Setting
from engine.analytic.theory import expected_tokens

K_MAX = 8  # default draft-length ceiling of a plan
MAX_NUM_SEQS = 256  # vLLM's default max_num_seqs on a GPU
MAX_NUM_SEQS_LIMIT = 16384  # the most batches one plan spans (the plan scans every batch)
K_MAX_LIMIT = 32

CycleCost = Callable[[int, int], float]
"""``cycle(batch, k)``: one cycle's cost in target decode steps at ``batch``, ``k c(B) +
v(B, k)``; it is called with ``k >= 1`` only (``k = 0`` is one plain step, cost 1)."""
K0Overhead = Callable[[int], float]
"""``overhead(batch)``: what a k = 0 range of a speculative config costs at ``batch``, as a
share of a plain step without one (0.1: the step takes 10% longer). vLLM 0.32 still runs the
draft and the dynamic path's bookkeeping there (docs/design.md, "Overheads")."""
Fits = Callable[[int, int], bool]
"""``fits(batch, k)``: whether ``batch`` sequences, speculating ``k`` tokens ahead, fit in
memory. The default, None, lets every batch fit."""


class PlanError(ValueError):
    """Inputs a plan cannot be made from; the message says which and why."""


@dataclass(frozen=True)
class Domain:
    """One kind of traffic: its share of the rows (``weight``) and its acceptance rate;
    ``survival``, when measured, its acceptance by position (survival rates s_1..s_n,
    :mod:`engine.analytic.positions`), which then prices its tokens a cycle instead of one
    alpha at every position."""

    name: str
    weight: float
    alpha: float
    survival: tuple[float, ...] | None = None

    def tokens(self, k: int) -> float:
        """Expected tokens a cycle at ``k``: by position when measured, else i.i.d."""
        if self.survival is None:
            return expected_tokens(self.alpha, k)
        return positions.tokens_per_cycle(positions.Curve(self.survival), k)

    def iid(self) -> Domain:
        """The same domain priced with one alpha at every position."""
        return replace(self, survival=None)


def single(alpha: float, survival: tuple[float, ...] | None = None) -> list[Domain]:
    """One alpha (and acceptance by position, when given) as a traffic "mix" of one domain."""
    return [Domain("all traffic", 1.0, alpha, survival)]


def by_position(text: str) -> list[Domain]:
    """All traffic priced by survival rates given as text (``positions``); its alpha is the
    one with the same tokens a cycle at the measured k. PlanError for rates that are no
    curve."""
    try:
        curve = positions.parse(text)
    except positions.CurveError as error:
        raise PlanError(f"positions: {error}") from None
    return single(round(curve.alpha_iid(), 4), curve.survival)


# One domain of a mix in a link or a query: "NAME:WEIGHT:ALPHA" (the name may hold anything but
# a colon). The pattern admits only entries that parse, so a schema built on it is exact.
MIX_PATTERN = r"^[^:]{1,40}:[0-9]{1,6}(\.[0-9]{1,6})?:(0(\.[0-9]{1,6})?|1(\.0{1,6})?)$"
MIX_MAX_DOMAINS = 12


def parse_mix_entry(text: str) -> Domain:
    """``"code:3:0.85"`` as ``Domain("code", 3.0, 0.85)``; PlanError when it does not fit."""
    if re.fullmatch(MIX_PATTERN[1:-1], text) is None:
        raise PlanError(f"{text[:48]!r} is not NAME:WEIGHT:ALPHA (a weight of at least 0, "
                        "an alpha from 0 to 1)")
    name, weight, alpha = text.rsplit(":", 2)
    return Domain(name, float(weight), float(alpha))


def mix_entry(d: Domain) -> str:
    """``d`` as ``NAME:WEIGHT:ALPHA`` (a colon in the name becomes "-"; 40 characters at most)."""
    name = d.name.replace(":", "-")[:40] or "-"
    return f"{name}:{_decimal(min(d.weight, 999_999), 6)}:{_decimal(d.alpha, 4)}"


def _decimal(x: float, places: int) -> str:
    text = f"{x:.{places}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def mixed_tokens(domains: Sequence[Domain], k: int) -> float:
    """Expected tokens per row per cycle over the mix: ``sum_d w_d E_k(alpha_d)``, with the
    weights normalised to sum to 1."""
    total = sum(d.weight for d in domains)
    if total <= 0:  # no weight at all (a domain the mix weighs 0, priced alone): each alike
        return sum(d.tokens(k) for d in domains) / len(domains)
    return sum(d.weight * d.tokens(k) for d in domains) / total


# ---- cost sources ----------------------------------------------------------------------------


def roofline_cycle(s: Setting) -> CycleCost:
    """Cycle costs from the roofline model of ``s`` (its alpha and k are not used)."""

    def cycle(batch: int, k: int) -> float:
        c, v = costs(s, batch, k)
        return k * c + v

    return cycle


def k0_curve(points: Sequence[tuple[int, float]]) -> K0Overhead:
    """A k = 0 overhead measured at a few batches: linear in B between them, held before the
    first and after the last (no extrapolation beyond what was measured)."""
    pts = sorted((int(b), float(o)) for b, o in points)
    if not pts:
        raise PlanError("a k = 0 overhead needs at least one batch")
    for b, o in pts:
        if b < 1 or not (math.isfinite(o) and o > -1):
            raise PlanError(f"a k = 0 overhead needs a batch of at least 1 and a share above -1 "
                            f"(got batch {b}, {o})")
    xs = [b for b, _ in pts]

    def overhead(batch: int) -> float:
        if batch <= xs[0]:
            return pts[0][1]
        if batch >= xs[-1]:
            return pts[-1][1]
        i = bisect.bisect_left(xs, batch)
        (b0, o0), (b1, o1) = pts[i - 1], pts[i]
        return o0 + (o1 - o0) * (batch - b0) / (b1 - b0)

    return overhead


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


# ---- the plan --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    """Batches ``lo..hi`` (inclusive) speculate ``k`` tokens (0: off). The gains are the
    lowest and highest over the range's batches: ``speedup`` over speculation off, and
    ``vs_fixed`` over the plan's best fixed k."""

    lo: int
    hi: int
    k: int
    speedup: tuple[float, float]
    vs_fixed: tuple[float, float]


@dataclass(frozen=True)
class DomainReport:
    """One domain of the mix under the plan: its speedup at the smallest planned batch (1
    unless it does not fit), and the first batch at which the plan's k makes it slower than
    plain decoding (None: never)."""

    name: str
    weight: float
    alpha: float
    first_speedup: float
    loses_from: int | None


@dataclass(frozen=True)
class Plan:
    ranges: list[Range]
    k_max: int  # the ceiling asked for (after any limit of the costs)
    max_num_seqs: int
    fixed_k: int  # the best single k in 1..k_max over the plan's batches
    fixed_gain: float  # the plan over that fixed k: geometric mean over the plan's batches
    domains: list[DomainReport]
    limiting: str | None  # the domain that limits the plan (mixes only)
    notices: list[str] = field(default_factory=list)
    gain_over_off: float = 1.0  # the plan over no speculative config: weighted geometric mean
    fixed_over_off: float = 1.0  # the best fixed k over no speculative config, likewise
    weighted: bool = False  # the means are weighted by a batch mix (else each batch once)
    # each planned batch's best speculating k that fits, and its S(B, k) over no config
    best_speculating: dict[int, tuple[float, int]] = field(default_factory=dict, compare=False,
                                                          repr=False)

    @property
    def largest_batch(self) -> int | None:
        """The largest batch planned: below max_num_seqs when memory runs out first."""
        return self.ranges[-1].hi if self.ranges else None

    @property
    def k_max_used(self) -> int:
        return max((r.k for r in self.ranges), default=0)

    @property
    def speculates(self) -> bool:
        return self.k_max_used > 0

    @property
    def configure(self) -> bool:
        """Whether to configure speculation at all: the plan speculates somewhere and gains
        over no speculative config for the traffic, its k = 0 ranges' cost counted."""
        return self.speculates and self.gain_over_off > 1.0

    @property
    def k0_ranges(self) -> list[Range]:
        return [r for r in self.ranges if r.k == 0]

    def k_at(self, batch: int) -> int | None:
        """The planned k at ``batch`` (None: the batch is not in the plan)."""
        return next((r.k for r in self.ranges if r.lo <= batch <= r.hi), None)

    def vllm_ranges(self) -> list[list[int]]:
        """``num_speculative_tokens_per_batch_size``: ``[[lo, hi, k], ...]``."""
        return [[r.lo, r.hi, r.k] for r in self.ranges]


def throughput(domains: Sequence[Domain], cycle: CycleCost, batch: int, k: int) -> float:
    """``S(B, k)``: tokens per row per cycle over the cycle's cost (1 at k = 0)."""
    return 1.0 if k == 0 else mixed_tokens(domains, k) / cycle(batch, k)


def check_inputs(domains: Sequence[Domain], k_max: int, max_num_seqs: int) -> None:
    if not domains:
        raise PlanError("a plan needs at least one alpha")
    for d in domains:
        if not (math.isfinite(d.alpha) and 0 <= d.alpha <= 1):
            raise PlanError(f"alpha of {d.name} must be from 0 to 1 (got {d.alpha})")
        if not (math.isfinite(d.weight) and d.weight >= 0):
            raise PlanError(f"the weight of {d.name} must be a number of at least 0 "
                            f"(got {d.weight})")
    if sum(d.weight for d in domains) <= 0:
        raise PlanError("the weights of the mix must not all be 0")
    if not 1 <= k_max <= K_MAX_LIMIT:
        raise PlanError(f"k_max must be from 1 to {K_MAX_LIMIT} (got {k_max})")
    if not 1 <= max_num_seqs <= MAX_NUM_SEQS_LIMIT:
        raise PlanError(f"max_num_seqs must be from 1 to {MAX_NUM_SEQS_LIMIT} "
                        f"(got {max_num_seqs})")


def plan(domains: Sequence[Domain], cycle: CycleCost, k_max: int = K_MAX,
         max_num_seqs: int = MAX_NUM_SEQS, fits: Fits | None = None,
         k0_overhead: K0Overhead | None = None,
         batch_weights: Mapping[int, float] | None = None,
         spread: Spread | None = None,
         schedule_cost: K0Overhead | None = None) -> Plan:
    """The schedule for batches ``1..max_num_seqs`` (see the module docstring).

    A batch that does not fit even without speculation is left out; a k that does not fit at
    a batch is not a candidate there. ``k0_overhead(B)`` prices a k = 0 range of a schedule:
    ``S(B, 0) = 1 / (1 + overhead)`` (None: free, ``S = 1``); a plan that speculates nowhere
    needs no speculative config and runs at ``S = 1``.

    The plan is weighed against speculation off and against the best fixed k (the one k in
    ``1..k_max`` with the highest mean) by the geometric mean of ``S`` over the planned
    batches, each weighted by ``batch_weights`` (a batch-size histogram of the traffic; None:
    every batch counts once). Ties go to the smaller k; with ``spread`` (measured costs), ks
    within their two spreads together of the fastest tie, the k of the batch below keeps a
    tie and else the smaller k takes it, so the timings' noise does not turn into a zigzag
    of ks. ``schedule_cost(B)``:
    what a per-batch schedule adds to every step, as a share of a plain step, on an engine
    that pays it at every k (vLLM's V1 model runner): the schedule's speculating ranges pay
    it, a fixed k never does, so the schedule must beat the fixed k with it counted."""
    check_inputs(domains, k_max, max_num_seqs)
    domains = list(domains)
    tokens = [0.0] + [mixed_tokens(domains, k) for k in range(1, k_max + 1)]
    notices: list[str] = []
    chosen: dict[int, int] = {}
    speed: dict[int, list[float]] = {}  # batch -> S(B, k) for k = 0..k_max, a fixed k's
    sched: dict[int, list[float]] = {}  # the same inside a schedule (its own cost counted)
    best_speculating: dict[int, tuple[float, int]] = {}
    for batch in range(1, max_num_seqs + 1):
        if fits is not None and not fits(batch, 0):
            continue
        off = 1.0 / (1.0 + _checked_overhead(k0_overhead(batch), batch)) if k0_overhead else 1.0
        row = [off] + [tokens[k] / _checked(cycle(batch, k), batch, k)
                       for k in range(1, k_max + 1)]
        extra = _checked_overhead(schedule_cost(batch), batch) if schedule_cost else 0.0
        in_schedule = [off] + [tokens[k] / (_checked(cycle(batch, k), batch, k) + extra)
                               for k in range(1, k_max + 1)]
        allowed = [k for k in range(k_max + 1) if k == 0 or fits is None or fits(batch, k)]
        best = _best(allowed, in_schedule, batch, spread, chosen.get(batch - 1))
        chosen[batch], speed[batch], sched[batch] = best, row, in_schedule
        spec = max((k for k in allowed if k > 0), key=lambda k: (row[k], -k), default=None)
        if spec is not None:
            best_speculating[batch] = (row[spec], spec)
    planned = sorted(chosen)
    if not planned:
        notices.append("Not even batch 1 fits in memory: there is nothing to plan.")
    elif planned[-1] < max_num_seqs:
        notices.append(f"Batches above {planned[-1]} do not fit in memory and are left out.")
    if not any(chosen.values()):  # no speculative config at all: k = 0 is plain decoding
        for row in (*speed.values(), *sched.values()):
            row[0] = 1.0
    weights = _batch_weights(planned, batch_weights, notices)

    def log_mean(value: Callable[[int], float]) -> float:
        total = sum(weights.values())
        return sum(w * math.log(value(b)) for b, w in weights.items()) / total if total else 0.0

    fixed_k = max(range(1, k_max + 1), key=lambda k: (log_mean(lambda b: speed[b][k]), -k))
    gain = math.exp(log_mean(lambda b: sched[b][chosen[b]]))
    fixed = math.exp(log_mean(lambda b: speed[b][fixed_k]))
    ranges: list[Range] = []
    start = 0
    for i, batch in enumerate(planned):
        last = i + 1 == len(planned)
        if last or chosen[planned[i + 1]] != chosen[batch] or planned[i + 1] != batch + 1:
            members = planned[start:i + 1]
            k = chosen[batch]
            gains = [sched[b][k] for b in members]
            versus = [sched[b][k] / speed[b][fixed_k] for b in members]
            ranges.append(Range(members[0], batch, k, (min(gains), max(gains)),
                                (min(versus), max(versus))))
            start = i + 1
    reports = [_domain_report(d, cycle, chosen, planned) for d in domains]
    limiting = _limiting(reports) if len(domains) > 1 and planned else None
    return Plan(ranges, k_max, max_num_seqs, fixed_k, gain / fixed if fixed else 1.0, reports,
                limiting, notices, gain_over_off=gain if planned else 1.0,
                fixed_over_off=fixed if planned else 1.0, weighted=batch_weights is not None,
                best_speculating=best_speculating)


def _best(allowed: list[int], row: list[float], batch: int, spread: Spread | None,
          below: int | None = None) -> int:
    """The fastest k (ties to the smaller). With ``spread``, every k within the timings'
    spread of the fastest (its speed times ``1 + both spreads`` reaches it) ties with it:
    the k held at the batch below wins a tie if it is in it (noise does not switch k), else
    the smallest k in it."""
    if spread is None:
        return max(allowed, key=lambda k: (row[k], -k))
    fastest = max(allowed, key=lambda k: (row[k], -k))
    ties = [k for k in allowed
            if row[k] * (1 + spread(batch, k) + spread(batch, fastest)) >= row[fastest]]
    return below if below in ties else min(ties)


def _batch_weights(planned: list[int], given: Mapping[int, float] | None,
                   notices: list[str]) -> dict[int, float]:
    """Each planned batch's weight: the histogram's (0 where it has none), or 1 each."""
    if given is None:
        return dict.fromkeys(planned, 1.0)
    inside = {b: float(w) for b, w in given.items() if b in set(planned) and w > 0}
    outside = sum(w for b, w in given.items() if b not in inside and w > 0)
    total = sum(w for w in given.values() if w > 0)
    if outside and total:
        notices.append(f"The batch mix puts {outside / total:.0%} of the traffic at batches "
                       "outside the plan (above max_num_seqs or not fitting in memory); the "
                       "comparison weighs the rest.")
    if planned and not inside:
        notices.append("The batch mix has no weight at any planned batch: every batch counts "
                       "once instead.")
        return dict.fromkeys(planned, 1.0)
    return inside


def _checked_overhead(overhead: float, batch: int) -> float:
    if not (math.isfinite(overhead) and overhead > -1):
        raise PlanError(f"the k = 0 overhead at batch {batch} is {overhead}: it must be a "
                        "finite share above -1 (0.1: a step 10% slower than no speculation)")
    return overhead


def _checked(cost: float, batch: int, k: int) -> float:
    """A cycle cost the plan can compare: finite and above 0."""
    if not (math.isfinite(cost) and cost > 0):
        raise PlanError(f"the cycle cost at batch {batch}, k = {k} is {cost}: costs must be "
                        "finite and above 0 (are the hardware's figures within reason?)")
    return cost


def _domain_report(d: Domain, cycle: CycleCost, chosen: dict[int, int],
                   planned: list[int]) -> DomainReport:
    def alone(batch: int) -> float:
        return throughput([d], cycle, batch, chosen[batch])

    loses = next((b for b in planned if chosen[b] > 0 and alone(b) < 1.0), None)
    return DomainReport(d.name, d.weight, d.alpha, alone(planned[0]) if planned else 1.0, loses)


def _limiting(reports: list[DomainReport]) -> str:
    """The domain the plan serves worst: the first to lose throughput under the plan's k (at
    the smallest batch), else the one with the lowest speedup at the first planned batch."""
    losing = [r for r in reports if r.loses_from is not None and r.weight > 0]
    if losing:
        return min(losing, key=lambda r: (r.loses_from, r.first_speedup)).name
    return min((r for r in reports if r.weight > 0), key=lambda r: r.first_speedup).name


def plan_json(p: Plan) -> dict:
    """The plan as a JSON-ready object (the CLI's ``--json`` and ``GET /api/plan``)."""
    return {
        "ranges": [{"lo": r.lo, "hi": r.hi, "k": r.k, "speedup": list(r.speedup),
                    "vs_fixed": list(r.vs_fixed)} for r in p.ranges],
        "k_max": p.k_max,
        "k_max_used": p.k_max_used,
        "max_num_seqs": p.max_num_seqs,
        "largest_batch": p.largest_batch,
        "fixed_k": p.fixed_k,
        "fixed_gain": p.fixed_gain,
        "gain_over_off": p.gain_over_off,
        "fixed_over_off": p.fixed_over_off,
        "weighted": p.weighted,
        "configure": p.configure,
        "domains": [{"name": d.name, "weight": d.weight, "alpha": d.alpha,
                     "first_speedup": d.first_speedup, "loses_from": d.loses_from}
                    for d in p.domains],
        "limiting": p.limiting,
        "speculates": p.speculates,
        "notices": p.notices,
    }
