"""The probe on tiny real pairs: pooled figures that add up, the temperature-0 identities,
seeded bootstrap intervals, stopping early, and the report."""

from __future__ import annotations

import random

import numpy as np
import pytest

from engine.analytic import theory
from engine.measure.probe import (
    ProbeConfig,
    PromptMeasure,
    _quantile,
    bootstrap_ratio,
    chart_data,
    fit_prompt,
    fit_prompts,
    markdown,
    plan,
    pool,
    probe,
    summarize_probe,
)
from engine.measure.prompt_sets import Prompt

PROMPTS = [Prompt("the quick brown fox", "animals"), Prompt("the cat sat on", "animals"),
           Prompt("speculative decoding drafts", "decoding"),
           Prompt("verifies them with a large", "decoding")]


def run(pair, config: ProbeConfig, prompts=PROMPTS, stop_after: int | None = None):
    measures = []
    for m in probe(pair, prompts, config):
        measures.append(m)
        if stop_after is not None and len(measures) == stop_after:
            break
    return summarize_probe(measures, config, engine="specscope", target="t", draft="d",
                           runs_planned=len(plan(prompts, config)))


@pytest.fixture(scope="module")
def result(good_pair):
    return run(good_pair, ProbeConfig(k=3, temperatures=[0.0, 1.0], max_new_tokens=12, seed=3,
                                      bootstrap=300))


def test_one_row_per_domain_and_temperature_in_order(result):
    assert [(r.domain, r.temperature) for r in result.rows] == [
        ("animals", 0.0), ("decoding", 0.0), ("animals", 1.0), ("decoding", 1.0)]
    assert all(r.prompts == 2 for r in result.rows)
    assert result.complete and result.runs_measured == result.runs_planned == 8


def test_counts_add_up_and_figures_follow_from_them(result):
    for r in result.rows:
        assert r.drafted == r.k * r.cycles
        assert r.accepted <= r.trials <= r.accepted + r.cycles
        assert r.alpha_counted == pytest.approx(r.accepted / r.trials)
        assert r.draft_acceptance_rate == pytest.approx(r.accepted / r.drafted)
        assert r.mean_acceptance_length == pytest.approx(1 + r.accepted / r.cycles)
        # Position i is accepted in every cycle that accepted at least i: summed, the accepted.
        assert sum(r.per_position_acceptance) * r.cycles == pytest.approx(r.accepted)
        assert r.per_position_acceptance == sorted(r.per_position_acceptance, reverse=True)
        assert r.alpha_powers == pytest.approx(theory.position_acceptance(r.alpha_counted, r.k))
        assert r.speedup_predicted == pytest.approx(theory.speedup(r.alpha_counted, r.k, r.c, r.v))
        assert (r.best_k, r.best_speedup) == theory.best_k(r.alpha_counted, r.c, r.v)
        assert r.c > 0 and r.v > 0 and r.step_ms > 0  # times: any load on the machine


def test_at_temperature_zero_top1_agreement_and_both_alphas_are_one_number(result):
    for r in (r for r in result.rows if r.temperature == 0):
        assert r.top1_agreement == pytest.approx(r.alpha_counted)
        assert r.alpha_expected == pytest.approx(r.alpha_counted)


def test_intervals_hold_the_estimate(result):
    for r in result.rows:
        for value, (low, high) in ((r.alpha_counted, r.alpha_counted_ci),
                                   (r.alpha_expected, r.alpha_expected_ci),
                                   (r.top1_agreement, r.top1_agreement_ci)):
            assert 0 <= low <= value <= high <= 1


def test_seeded_probe_is_reproducible(good_pair, result):
    again = run(good_pair, ProbeConfig(k=3, temperatures=[0.0, 1.0], max_new_tokens=12, seed=3,
                                       bootstrap=300))
    for a, b in zip(result.rows, again.rows, strict=True):
        assert (a.accepted, a.trials, a.alpha_counted_ci) == (b.accepted, b.trials,
                                                              b.alpha_counted_ci)


def test_identical_draft_is_always_accepted_and_an_unrelated_one_rarely(twin_pair, bad_pair):
    config = ProbeConfig(k=3, temperatures=[0.0, 1.0], max_new_tokens=10, bootstrap=50)
    twin = run(twin_pair, config, PROMPTS[:2])
    assert all(r.alpha_counted == 1.0 and r.alpha_expected == pytest.approx(1.0)
               and r.top1_agreement == 1.0 for r in twin.rows)
    bad = run(bad_pair, config, PROMPTS[:2])
    assert all(r.alpha_counted < 0.5 for r in bad.rows)


def test_stopping_early_pools_what_was_measured(good_pair):
    partial = run(good_pair, ProbeConfig(k=2, temperatures=[0.0, 1.0], max_new_tokens=6,
                                         bootstrap=20), stop_after=3)
    assert not partial.complete
    assert (partial.runs_measured, partial.runs_planned) == (3, 8)
    assert sum(r.prompts for r in partial.rows) == 3
    assert "Stopped early" in markdown(partial)


def test_bootstrap_interval_is_seeded_and_narrows_with_more_prompts():
    items = [(a, 10) for a in (2, 4, 6, 8, 5, 7, 3, 9)]
    ci = bootstrap_ratio(items, lambda x: x[0], lambda x: x[1], 2000, random.Random(1))
    assert ci == bootstrap_ratio(items, lambda x: x[0], lambda x: x[1], 2000, random.Random(1))
    assert ci[0] < 0.55 < ci[1]
    wide = ci[1] - ci[0]
    many = bootstrap_ratio(items * 16, lambda x: x[0], lambda x: x[1], 2000, random.Random(1))
    assert many[1] - many[0] < wide / 2  # 16x the prompts: about a quarter of the width
    same = bootstrap_ratio([(3, 4)] * 5, lambda x: x[0], lambda x: x[1], 100, random.Random(0))
    assert same == [0.75, 0.75]


def test_quantile_matches_numpy():
    values = sorted(random.Random(4).random() for _ in range(37))
    for q in (0.0, 0.025, 0.5, 0.975, 1.0):
        assert _quantile(values, q) == pytest.approx(float(np.quantile(values, q)))


def test_long_prompts_are_cut_from_the_start_to_fit_the_context(good_pair):
    limit = good_pair.target.config.max_position_embeddings
    text = " ".join(f"word{i}" for i in range(limit)) + " THE END"
    cut, was_cut = fit_prompt(good_pair, text, room=40)
    assert was_cut and text.endswith(cut) and cut.endswith("THE END")
    assert len(good_pair.tokenizer(cut).input_ids) <= limit - 40
    assert fit_prompt(good_pair, "short", room=40) == ("short", False)
    fitted, notices = fit_prompts(good_pair, [Prompt(text, "long"), Prompt("short", "s")],
                                  ProbeConfig(max_new_tokens=30, k=4))
    assert fitted[1].text == "short" and len(notices) == 1 and "1 prompt(s)" in notices[0]
    with pytest.raises(ValueError, match="leaves no room"):
        fit_prompt(good_pair, "x", room=limit)


def test_a_cut_prompt_fits_even_when_the_tokenizer_adds_a_bos_token(good_pair):
    """Llama 3's tokenizer puts a BOS before every text: a cut at the start of the text's
    last ``keep`` tokens leaves ``keep + 1``, however often it is repeated."""
    from dataclasses import replace

    from support.tiny_models import CORPUS, build_tokenizer
    from tokenizers import processors

    tokenizer = build_tokenizer(CORPUS)
    bos = tokenizer.convert_tokens_to_ids("<s>")
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", bos)])
    pair = replace(good_pair, tokenizer=tokenizer)
    assert tokenizer("the cat").input_ids[0] == bos
    limit = pair.target.config.max_position_embeddings
    for room in (40, limit - 30, limit - 2):
        text = " ".join(f"word{i}" for i in range(limit)) + " THE END"
        cut, was_cut = fit_prompt(pair, text, room=room)
        assert was_cut and text.endswith(cut)
        assert len(tokenizer(cut).input_ids) <= limit - room
    with pytest.raises(ValueError, match="no room"):
        fit_prompt(pair, "x y z", room=limit - 1)  # the BOS alone fills what is left


def test_bad_settings_are_refused_before_anything_runs(good_pair):
    for config, message in ((ProbeConfig(temperatures=[]), "at least one temperature"),
                            (ProbeConfig(temperatures=[-1.0]), "temperature"),
                            (ProbeConfig(k=0), "k"), (ProbeConfig(bootstrap=0), "bootstrap")):
        with pytest.raises(ValueError, match=message):
            next(probe(good_pair, PROMPTS, config))


def test_markdown_and_chart_data(result):
    text = markdown(result, "specscope probe x")
    assert text.count("\n| animals |") == 4 and text.count("\n| decoding |") == 4
    assert "counted α [95% CI]" in text and "`specscope probe x`" in text
    charts = chart_data(result)
    assert len(charts["alpha_by_domain"]) == 4
    series = charts["alpha_vs_temperature"]["series"]
    assert [s["domain"] for s in series] == ["animals", "decoding"]
    assert [p["temperature"] for p in series[0]["points"]] == [0.0, 1.0]
    assert series[1]["points"][1]["alpha"] == result.rows[3].alpha_counted


def test_an_engine_without_distributions_reports_n_a(result):
    from dataclasses import replace

    blind = replace(result, rows=[replace(r, alpha_expected=None, alpha_expected_ci=None,
                                          top1_agreement=None, top1_agreement_ci=None)
                                  for r in result.rows])
    assert markdown(blind).count("n/a") == 2 * len(result.rows)


def test_a_row_without_trials_has_no_estimates_and_no_chart_point(result):
    """Cycles that proposed nothing (a prompt-lookup drafter without a match) try nothing:
    every estimate is None, the report says n/a, the charts leave the row out."""
    k = result.k
    empty = PromptMeasure("lookup", 0.0, 0, tokens=5, cycles=5, proposing=0, accepted=0, drafted=0,
                          trials=0, verified=0, overlap_sum=0.0, top1_agreements=0,
                          histogram=[0] * (k + 1), draft_step_ms=[], verify_ms=[],
                          baseline_step_ms=[])
    row = pool([empty], k, samples=50, seed=0)
    assert (row.alpha_counted, row.alpha_counted_ci, row.draft_acceptance_rate,
            row.speedup_predicted, row.best_k) == (None,) * 5
    assert row.per_position_acceptance == [None] * k and row.alpha_powers == [None] * k
    assert bootstrap_ratio([empty], lambda m: m.accepted, lambda m: m.trials, 50,
                           random.Random(0)) is None
    from dataclasses import replace

    with_empty = replace(result, rows=[*result.rows, row])
    lines = markdown(with_empty).splitlines()
    assert [line for line in lines if line.startswith("| lookup |")] == [
        "| lookup | 0 | 1 | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a | n/a |",
        "| lookup | 0 | " + " | ".join(["n/a / n/a"] * k) + " |"]
    charts = chart_data(with_empty)
    assert "lookup" not in {b["domain"] for b in charts["alpha_by_domain"]}
    assert "lookup" not in {s["domain"] for s in charts["alpha_vs_temperature"]["series"]}


def test_greedy_drafting_reaches_the_loop_and_the_result_names_it(good_pair, result):
    """--draft-sample greedy: the draft proposes its argmax (q one-hot). At temperature 0 both
    ways draft the argmax and count alike; at temperature 1 the drafts differ, and so does
    what is counted. The result and its report say which way alpha was measured."""
    greedy = run(good_pair, ProbeConfig(k=3, temperatures=[0.0, 1.0], max_new_tokens=12,
                                        seed=3, bootstrap=300, draft_sample="greedy"))
    assert result.draft_sample == "probabilistic" and greedy.draft_sample == "greedy"
    assert "(greedy drafting)" in markdown(greedy) and "(probabilistic" in markdown(result)
    by_key = {(r.domain, r.temperature): r for r in result.rows}
    for row in greedy.rows:
        other = by_key[row.domain, row.temperature]
        if row.temperature == 0.0:
            assert (row.accepted, row.trials) == (other.accepted, other.trials)
    assert [(r.accepted, r.trials) for r in greedy.rows if r.temperature == 1.0] != [
        (r.accepted, r.trials) for r in result.rows if r.temperature == 1.0]
    with pytest.raises(ValueError, match="draft sampling"):
        ProbeConfig(draft_sample="argmax").validate()
