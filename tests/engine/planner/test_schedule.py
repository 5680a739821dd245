"""The batch-size schedule: against a brute-force search, the shape of its ranges, the mix,
memory, plans on the roofline and on timed costs, the price of a k = 0 range, a batch mix,
a mix in a link and the timings' spread."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.analytic import theory
from engine.analytic.break_even import costs
from engine.analytic.passes import Setting
from engine.analytic.presets import HARDWARE, PAIRS
from engine.analytic.timed_costs import PlanError, timed_costs
from engine.planner import schedule
from engine.planner.costs import k0_curve, roofline_cycle
from engine.planner.schedule import (
    Domain,
    mix_entry,
    mixed_tokens,
    parse_mix_entry,
    plan,
    single,
)

REPO = Path(__file__).resolve().parents[3]


def table_costs(seed: int, max_batch: int, k_max: int):
    """Arbitrary positive cycle costs, one per (batch, k): the planner must not rely on any
    shape of the costs."""
    rng = random.Random(seed)
    table = {(b, k): rng.uniform(0.5, 3.0 * k + 1.0) for b in range(1, max_batch + 1)
             for k in range(1, k_max + 1)}
    return lambda batch, k: table[(batch, k)]


def brute_force(domains, cycle, k_max, max_num_seqs, fits=None) -> dict[int, int]:
    """Every batch on its own: every allowed k, the mixed tokens summed by hand."""
    total = sum(d.weight for d in domains)
    best = {}
    for b in range(1, max_num_seqs + 1):
        if fits is not None and not fits(b, 0):
            continue
        scores = {0: 1.0}
        for k in range(1, k_max + 1):
            if fits is None or fits(b, k):
                tokens = sum(d.weight / total * sum(d.alpha**i for i in range(k + 1))
                             for d in domains)
                scores[k] = tokens / cycle(b, k)
        top = max(scores.values())
        best[b] = min(k for k, s in scores.items() if s == top)
    return best


def expanded(p) -> dict[int, int]:
    return {b: r.k for r in p.ranges for b in range(r.lo, r.hi + 1)}


domains_strategy = st.lists(
    st.builds(Domain, st.sampled_from(["code", "chat", "math", "prose"]),
              st.floats(0.05, 5.0), st.floats(0.0, 1.0)),
    min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(domains=domains_strategy, seed=st.integers(0, 10**6), k_max=st.integers(1, 8),
       max_num_seqs=st.integers(1, 40), capacity=st.none() | st.integers(0, 45),
       k_room=st.integers(0, 8))
def test_the_plan_is_the_brute_force_choice_at_every_batch(domains, seed, k_max, max_num_seqs,
                                                          capacity, k_room):
    cycle = table_costs(seed, max_num_seqs, k_max)
    # Memory: batches past `capacity` do not fit; near it, only short drafts do.
    fits = None if capacity is None else (lambda b, k: b + (k > k_room) * 3 <= capacity)
    p = plan(domains, cycle, k_max, max_num_seqs, fits)
    assert expanded(p) == brute_force(domains, cycle, k_max, max_num_seqs, fits)


@settings(max_examples=150, deadline=None)
@given(domains=domains_strategy, seed=st.integers(0, 10**6), k_max=st.integers(1, 8),
       max_num_seqs=st.integers(1, 40))
def test_ranges_are_merged_sorted_and_cover_every_batch_from_one(domains, seed, k_max,
                                                                 max_num_seqs):
    p = plan(domains, table_costs(seed, max_num_seqs, k_max), k_max, max_num_seqs)
    assert p.ranges[0].lo == 1 and p.ranges[-1].hi == max_num_seqs
    for before, after in zip(p.ranges, p.ranges[1:], strict=False):
        assert after.lo == before.hi + 1  # no gap, no overlap
        assert after.k != before.k  # equal neighbours are merged
    assert all(r.lo <= r.hi and 0 <= r.k <= k_max for r in p.ranges)


@settings(max_examples=100, deadline=None)
@given(domains=domains_strategy, seed=st.integers(0, 10**6), k_max=st.integers(1, 8),
       max_num_seqs=st.integers(1, 30))
def test_the_plan_is_never_below_off_or_any_fixed_k_and_reports_its_gains(domains, seed, k_max,
                                                                          max_num_seqs):
    cycle = table_costs(seed, max_num_seqs, k_max)
    p = plan(domains, cycle, k_max, max_num_seqs)

    def s(b: int, k: int) -> float:
        return 1.0 if k == 0 else mixed_tokens(domains, k) / cycle(b, k)

    for r in p.ranges:
        gains = [s(b, r.k) for b in range(r.lo, r.hi + 1)]
        versus = [s(b, r.k) / s(b, p.fixed_k) for b in range(r.lo, r.hi + 1)]
        assert r.speedup == pytest.approx((min(gains), max(gains)))
        assert r.vs_fixed == pytest.approx((min(versus), max(versus)))
        assert min(gains) >= 1.0 and min(versus) >= 1.0 - 1e-12
    # The best fixed k: the highest geometric mean over the batches, found by trying each.
    def geo(k: int) -> float:
        return sum(math.log(s(b, k)) for b in range(1, max_num_seqs + 1))

    assert geo(p.fixed_k) == max(geo(k) for k in range(1, k_max + 1))
    assert p.fixed_gain >= 1.0 - 1e-12


def test_a_mix_plans_with_the_mean_of_the_expected_tokens_not_with_the_mean_alpha():
    # Half the rows accept everything, half nothing: E_k over the mix is (k + 2) / 2, which
    # grows with k; E_k at the mean alpha 0.5 is at most 2, so long drafts would look wasted.
    mix = [Domain("copy", 1.0, 1.0), Domain("noise", 1.0, 0.0)]

    def cycle(b: int, k: int) -> float:
        return 0.3 * k + 1.0

    assert mixed_tokens(mix, 3) == pytest.approx(2.5)
    assert plan(mix, cycle, 8, 4).ranges[0].k == 8
    assert plan(single(0.5), cycle, 8, 4).ranges[0].k == 1


def test_the_limiting_domain_is_the_first_the_plan_makes_slower_than_plain_decoding():
    # Verification gets dearer with the batch; code (alpha 0.95) carries the mix's k far past
    # the batch at which chat (alpha 0.3) stops gaining from it.
    def cycle(b: int, k: int) -> float:
        return 0.05 * k + 1.0 + 0.02 * k * b

    mix = [Domain("code", 3.0, 0.95), Domain("chat", 1.0, 0.3)]
    p = plan(mix, cycle, 8, 64)
    chat = next(d for d in p.domains if d.name == "chat")
    code = next(d for d in p.domains if d.name == "code")
    assert chat.loses_from is not None
    assert code.loses_from is None or code.loses_from > chat.loses_from
    assert p.limiting == "chat"
    k = p.k_at(chat.loses_from)
    assert k > 0 and theory.expected_tokens(0.3, k) / cycle(chat.loses_from, k) < 1.0
    assert plan(single(0.7), cycle, 8, 64).limiting is None  # one domain limits nothing


def test_batches_that_do_not_fit_are_left_out_and_said_so():
    p = plan(single(0.7), lambda b, k: 0.1 * k + 1, 4, 256, fits=lambda b, k: b <= 100)
    assert p.largest_batch == 100
    assert any("above 100" in n for n in p.notices)
    nothing = plan(single(0.7), lambda b, k: 0.1 * k + 1, 4, 256, fits=lambda b, k: False)
    assert nothing.ranges == [] and nothing.largest_batch is None
    assert any("Not even batch 1" in n for n in nothing.notices)
    assert not nothing.speculates and not nothing.configure


def test_bad_inputs_are_refused_with_a_message():
    cycle = lambda b, k: 1.0 + k  # noqa: E731
    for domains, k_max, seqs, words in [
        ([], 4, 8, "at least one alpha"),
        (single(1.5), 4, 8, "from 0 to 1"),
        (single(math.nan), 4, 8, "from 0 to 1"),
        ([Domain("a", 0, 0.5)], 4, 8, "not all be 0"),
        ([Domain("a", -1, 0.5)], 4, 8, "at least 0"),
        (single(0.5), 0, 8, "k_max"),
        (single(0.5), 4, 0, "max_num_seqs"),
    ]:
        with pytest.raises(PlanError, match=words):
            plan(domains, cycle, k_max, seqs)


# ---- on the roofline model ----


def setting(pair: str, hardware: str, **changes) -> Setting:
    p = PAIRS[pair]
    return replace(Setting(HARDWARE[hardware], p.target, p.draft), **changes)


def test_on_short_contexts_the_plan_shortens_drafts_as_the_batch_grows_then_turns_off():
    s = setting("llama-8b-1b", "h100-sxm", context=128)
    p = plan(single(0.7), roofline_cycle(s), 8, 1024)
    ks = [r.k for r in p.ranges]
    assert ks == sorted(ks, reverse=True)  # compute catches up: never a longer draft later
    # Batch 1 is memory-bound (v = 1): the slider model's best k with c the step ratio.
    assert ks[0] == theory.best_k(0.7, costs(s, 1)[0], 1.0, 8)[0] and ks[-1] == 0
    assert p.speculates and p.k_max_used == ks[0]


def test_at_alpha_zero_nothing_pays_and_the_plan_says_do_not_speculate():
    p = plan(single(0.0), roofline_cycle(setting("llama-70b-1b", "h100-sxm")), 8, 256)
    assert [(r.lo, r.hi, r.k) for r in p.ranges] == [(1, 256, 0)]
    assert not p.speculates and not p.configure


# ---- costs from timed passes ----


def test_the_shipped_measurement_gives_a_plan_on_its_own_timings():
    data = json.loads((REPO / "measurements" / "shipped-cpu.json").read_text())
    costs = timed_costs(data["passes"])
    assert costs.k_limit == data["k"]
    p = plan(single(0.7), costs.cycle, costs.k_limit, 64)
    # At batch 1 the file's own prediction (its k, its alpha) is one of the candidates.
    assert p.ranges[0].speedup[1] >= data["points"][0]["speedup"] - 1e-12


# ---- what a k = 0 range costs, and a batch mix ----


def test_a_k0_range_is_priced_at_its_overhead_and_that_can_move_the_choice():
    # k = 1 loses 5% at every batch; a k = 0 range costs 10% from batch 50
    cycle = lambda b, k: 1.0 / 0.95 * theory.expected_tokens(0.5, k) if k == 1 else 99.0  # noqa: E731
    overhead = k0_curve([(49, 0.0), (50, 0.10)])
    p = plan(single(0.5), cycle, 2, 100, k0_overhead=overhead)
    assert [(r.lo, r.hi, r.k) for r in p.ranges] == [(1, 49, 0), (50, 100, 1)]
    assert p.ranges[0].speedup == (1.0, 1.0)
    assert p.ranges[1].speedup == pytest.approx((0.95, 0.95))
    assert p.speculates and not p.configure  # every batch is below off: do not configure
    assert p.gain_over_off == pytest.approx(0.95 ** (51 / 100))


def test_a_plan_that_never_speculates_needs_no_config_and_pays_no_k0_price():
    p = plan(single(0.0), lambda b, k: 1.0 + k, 4, 32, k0_overhead=lambda b: 0.2)
    assert [(r.lo, r.hi, r.k) for r in p.ranges] == [(1, 32, 0)]
    assert p.ranges[0].speedup == (1.0, 1.0) and p.gain_over_off == 1.0


def test_k0_ranges_that_cost_more_than_the_speculating_ranges_gain_mean_do_not_configure():
    gain = lambda b: 1.2 if b <= 10 else 0.5  # noqa: E731
    cycle = lambda b, k: theory.expected_tokens(0.6, k) / gain(b) + (k - 1)  # noqa: E731
    cheap = plan(single(0.6), cycle, 3, 100, k0_overhead=lambda b: 0.01)
    dear = plan(single(0.6), cycle, 3, 100, k0_overhead=lambda b: 0.10)
    assert [r.k for r in cheap.ranges] == [1, 0] == [r.k for r in dear.ranges]
    # 10 batches gain 20%, 90 lose the overhead: 1.2^0.1 x 0.99^0.9 > 1 > 1.2^0.1 x 0.9^0.9
    assert cheap.configure and cheap.gain_over_off == pytest.approx(
        1.2 ** 0.1 / 1.01 ** 0.9)
    assert not dear.configure and dear.gain_over_off == pytest.approx(1.2 ** 0.1 / 1.1 ** 0.9)


def test_a_batch_mix_weighs_the_comparison_as_the_traffic_runs():
    gain = lambda b: 1.2 if b <= 10 else 0.5  # noqa: E731
    cycle = lambda b, k: theory.expected_tokens(0.6, k) / gain(b) + (k - 1)  # noqa: E731
    small = plan(single(0.6), cycle, 3, 100, k0_overhead=lambda b: 0.10,
                 batch_weights={4: 9.0, 64: 1.0})
    assert small.weighted and small.configure
    assert small.gain_over_off == pytest.approx(1.2 ** 0.9 / 1.1 ** 0.1)
    # the ranges are the same: the mix weighs the plan, it does not change a batch's best k
    assert small.vllm_ranges() == plan(single(0.6), cycle, 3, 100,
                                       k0_overhead=lambda b: 0.10).vllm_ranges()
    outside = plan(single(0.6), cycle, 3, 100, batch_weights={4: 1.0, 500: 1.0})
    assert any("50% of the traffic" in n for n in outside.notices)


# ---- a mix in a link ----


@settings(max_examples=200, deadline=None)
@given(name=st.text(min_size=0, max_size=60), weight=st.floats(0, 2e6),
       alpha=st.floats(0, 1))
def test_every_mix_entry_written_parses_back_to_its_domain(name, weight, alpha):
    entry = mix_entry(Domain(name, weight, alpha))
    back = parse_mix_entry(entry)
    assert ":" not in back.name and 1 <= len(back.name) <= 40
    assert back.weight == pytest.approx(min(weight, 999_999), abs=1e-6)
    assert back.alpha == pytest.approx(alpha, abs=5e-5)


@pytest.mark.parametrize("entry", ["code", "code:1", ":1:0.5", "code:-1:0.5", "code:1:1.5",
                                   "code:1:0.5x", "c:1e3:0.5", "x" * 41 + ":1:0.5"])
def test_a_mix_entry_that_does_not_fit_is_refused_with_the_format(entry):
    with pytest.raises(PlanError, match="NAME:WEIGHT:ALPHA"):
        parse_mix_entry(entry)


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0.0, -1.0])
def test_costs_that_are_not_finite_and_positive_are_refused(bad):
    with pytest.raises(PlanError, match="finite and above 0"):
        plan(single(0.7), lambda b, k: bad if b == 3 else 1.0 + k, 4, 8)


def test_gains_within_the_timings_spread_are_ties_kept_by_the_k_below_else_the_smaller():
    """Noise in measured costs must not zigzag the schedule: k = 2 beats k = 1 by 10 % at
    batch 1, outside their spreads (2 % each), and wins; from batch 2 on by 3 %, inside them:
    a tie, which the k of the batch below keeps. Where no batch below holds a k in the tie,
    the smaller k takes it."""
    tokens = {1: 1.6, 2: 1.96}  # alpha 0.6

    def cycle(batch: int, k: int) -> float:
        gain = 1.10 if batch == 1 else 1.03  # how much faster k = 2 is than k = 1
        base = tokens[1] / 1.2  # k = 1 runs at 1.2x off
        return base if k == 1 else tokens[2] / (1.2 * gain)

    domains = schedule.single(0.6)
    plain = schedule.plan(domains, cycle, 2, 4)
    assert [plain.k_at(b) for b in (1, 2, 3, 4)] == [2, 2, 2, 2]
    steady = schedule.plan(domains, cycle, 2, 4, spread=lambda batch, k: 0.02)
    assert [steady.k_at(b) for b in (1, 2, 3, 4)] == [2, 2, 2, 2]
    noisy = schedule.plan(domains, cycle, 2, 4, spread=lambda batch, k: 0.06)
    # a tie at batch 1 too: the smaller k takes it, and the batches above keep it
    assert [noisy.k_at(b) for b in (1, 2, 3, 4)] == [1, 1, 1, 1]
    # k = 0 (off) is the smallest k: speculating must clear the spread to be chosen at all
    off = schedule.plan(domains, cycle, 2, 4, spread=lambda batch, k: 0.2)
    assert [off.k_at(b) for b in (1, 2, 3, 4)] == [0, 0, 0, 0]


def test_a_schedules_own_cost_is_paid_by_its_speculating_ranges_never_by_a_fixed_k():
    """On vLLM's V1 runner every step of a schedule pays its cost (issue 49548); the best
    fixed k does not, so the schedule must beat it with that cost counted."""
    def cycle(batch: int, k: int) -> float:
        return 1.0 + 0.3 * k if batch <= 4 else 1.0 + 0.5 * k

    domains = schedule.single(0.8)
    free = schedule.plan(domains, cycle, 4, 8)
    paid = schedule.plan(domains, cycle, 4, 8, schedule_cost=lambda batch: 0.1)
    assert paid.fixed_k == free.fixed_k and paid.fixed_over_off == free.fixed_over_off
    assert paid.gain_over_off < free.gain_over_off
    for r in paid.ranges:  # each range's speed is the schedule's, its cost counted
        if r.k:
            tokens = schedule.mixed_tokens(domains, r.k)
            assert r.speedup[0] == pytest.approx(tokens / (cycle(r.hi, r.k) + 0.1))


def test_a_domain_the_mix_weighs_zero_is_still_priced_alone():
    """A mix entry of weight 0 plans nothing for it, but its own report prices it (it used to
    divide by its zero weight)."""
    from engine.planner import schedule as sched

    domains = [sched.Domain("code", 3.0, 0.85), sched.Domain("chat", 0.0, 0.4)]
    assert sched.mixed_tokens(domains[1:], 2) == pytest.approx(1 + 0.4 + 0.16)
    assert sched.mixed_tokens(domains, 2) == pytest.approx(1 + 0.85 + 0.85**2)
