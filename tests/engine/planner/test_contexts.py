"""Context classes: a plan each, one schedule safe for all, and which to deploy."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.analytic.timed_costs import PlanError
from engine.planner import contexts, schedule
from engine.planner.costs import Costs, k0_curve
from engine.planner.drafters import drafter_costs
from engine.planner.inputs import PlanInputs
from engine.planner.report import report

INPUTS = PlanInputs(hardware="h100-sxm", models="llama-70b-1b", gpus=8, alpha=0.7)
SELF_SPEC = PlanInputs(hardware="h100-sxm", models="llama-8b-1b", gpus=8, alpha=0.81,
                       drafter="self-spec")
DOMAINS = schedule.single(0.7)


def plans(classes: list[int], inputs: PlanInputs = INPUTS,
          ) -> tuple[dict[int, Costs], dict[int, dict], dict]:
    domains = schedule.single(inputs.alpha)
    by_costs = {c: drafter_costs(replace(inputs, context=c).setting(), inputs.drafter)
                for c in classes}
    reports = {c: report(domains, by_costs[c], replace(inputs, context=c)) for c in classes}
    one = report(domains, contexts.worst_costs(by_costs), replace(inputs, context=classes[-1]))
    return by_costs, reports, one


def test_contexts_parse_sorted_distinct_and_in_bounds():
    assert contexts.parse_contexts("8192, 512,8192,32768", 1, 131072) == [512, 8192, 32768]
    for bad, words in (("512", "2 to 8 different"), ("512,lots", "whole token counts"),
                       ("0,512", "from 1 to 131072")):
        with pytest.raises(PlanError, match=words):
            contexts.parse_contexts(bad, 1, 131072)


def test_the_one_schedule_prices_each_batch_at_its_dearest_class_that_fits():
    by_costs, _, _ = plans([512, 32768])
    worst = contexts.worst_costs(by_costs)
    short, long = by_costs[512], by_costs[32768]
    assert worst.cycle(16, 4) == max(short.cycle(16, 4), long.cycle(16, 4))
    largest_long = max(b for b in range(1, 2000) if long.fits(b, 0))
    beyond = largest_long + 1
    assert short.fits(beyond, 0) and not long.fits(beyond, 0)
    assert worst.fits(beyond, 0) and worst.cycle(beyond, 4) == short.cycle(beyond, 4)
    assert worst.context == 32768  # its engine's max_model_len is the longest context


def test_the_one_schedule_is_never_below_off_where_a_class_plan_would_be_off():
    by_costs, reports, one = plans([512, 32768])
    ks = contexts.k_by_batch(one)
    own = {c: contexts.k_by_batch(r) for c, r in reports.items()}
    assert any(k > 0 for k in ks.values())
    for batch, k in ks.items():
        if k == 0:
            continue
        for context, costs in by_costs.items():
            if costs.fits(batch, 0) and own[context].get(batch) == 0:
                assert schedule.throughput(DOMAINS, costs.cycle, batch, k) > 1.0


def test_the_table_has_a_column_per_class_and_a_dash_where_a_class_does_not_fit():
    _, reports, one = plans([512, 32768])
    rows = contexts.table(reports, one)
    assert rows[0]["lo"] == 1 and rows[-1]["hi"] == one["plan"]["largest_batch"]
    assert all(a["hi"] + 1 == b["lo"] for a, b in zip(rows, rows[1:], strict=False))
    own = {c: contexts.k_by_batch(r) for c, r in reports.items()}
    for row in rows:
        for batch in (row["lo"], row["hi"]):
            assert row["k"] == {c: own[c].get(batch) for c in own}
    assert any(row["k"][32768] is None for row in rows)  # long prompts stop fitting first


def test_per_class_engines_are_recommended_when_one_schedule_gives_up_much():
    """Self-speculation wants a longer draft at 32,000 tokens than at 4,000 (MagicDec): one
    schedule safe for both holds the long class back."""
    by_costs, reports, one = plans([4000, 32000], SELF_SPEC)
    result = contexts.compare(schedule.single(0.81), by_costs, reports, one,
                              k0_curve([(1, 0.05)]))
    gains = {c["context"]: c for c in result["classes"]}
    for c in gains.values():
        # each class's own plan is the best it can get: the one schedule never beats it
        assert c["own"] >= c["one"] - 1e-12
        assert c["gives_up"] == pytest.approx(c["own"] / c["one"] - 1)
    assert gains[32000]["gives_up"] > contexts.ONE_ENGINE_TOLERANCE
    assert result["recommend"] == "per-class"
    assert f"gives up {gains[32000]['gives_up']:.1%} at context 32000" in \
        result["recommendation"]


def test_one_engine_is_recommended_when_one_schedule_costs_no_class_more_than_a_percent():
    # on the ideal roofline (with the fitted overheads the two classes' plans part further)
    ideal = replace(INPUTS, launch_us_per_layer=0, allreduce_us_per_log2=0,
                    sample_row_overhead_us=0, spec_overhead_ms=0, spec_row_overhead_us=0,
                    step_overhead_us=0, draft_overhead_us=0)
    by_costs, reports, one = plans([512, 32768], ideal)
    result = contexts.compare(DOMAINS, by_costs, reports, one, k0_curve([(1, 0.0)]))
    assert max(c["gives_up"] for c in result["classes"]) <= contexts.ONE_ENGINE_TOLERANCE
    assert result["recommend"] == "one-engine"
    assert result["recommendation"].startswith("Deploy one engine with one schedule")
    assert "max_model_len 32768" in result["recommendation"]
