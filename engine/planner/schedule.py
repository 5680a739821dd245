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

The costs come from a function ``cycle(batch, k)``: :func:`engine.planner.costs.roofline_cycle`
(a hardware and model preset, :mod:`engine.analytic.roofline`) or
:class:`engine.analytic.timed_costs.TimedCosts` (forward passes timed on real hardware,
``specscope roofline``). Pure Python, standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from engine.analytic import positions
from engine.analytic.theory import expected_tokens
from engine.analytic.timed_costs import PlanError, Spread

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
