"""The roofline with overheads: every price goes through a plain step ``t_p(B,1) + l(p) + s B``
and a cycle ``k (t_q + l(q)) + t_p(B,k+1) + l(p) + s B + o_spec``, each pass launching its own
model's layers; all-zero overheads are the ideal roofline exactly; the defaults are the
published fit at the setting's fractions."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engine.analytic import default_overheads, overheads, published, validate
from engine.analytic.break_even import (
    best_k_at,
    break_even_batch,
    costs,
    lookup_break_even_batch,
    lookup_speedup_at,
    speedup_at,
)
from engine.analytic.lookup import speedup as lookup_speedup
from engine.analytic.overheads import NONE, Overheads
from engine.analytic.passes import Setting, draft_pass, target_pass
from engine.analytic.presets import ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS, HARDWARE, PAIRS
from engine.analytic.roofline import roofline
from engine.analytic.theory import expected_tokens
from engine.planner.costs import roofline_cycle

PAIR = PAIRS["llama-8b-1b"]
A100_8 = Setting(HARDWARE["a100-80gb"], PAIR.target, PAIR.draft, gpus=8, context=4000,
                 alpha=0.7, k=4, bw_share=ACHIEVED_BANDWIDTH,
                 flops_share=ACHIEVED_FLOPS)
KNOWN = Overheads(launch_s_per_layer=20e-6, sample_s_per_row=3e-6, spec_fixed_s=0.5e-3,
                  spec_per_row_s=10e-6)
L_P, L_Q = 32 * 20e-6, 16 * 20e-6  # the 8B's 32 layers, the 1B's 16


def ideal(s: Setting, batch: int, k: int) -> tuple[float, float, float]:
    """c, v and S of the ideal roofline, from the passes alone."""
    t_p, t_q = target_pass(s, batch).seconds, draft_pass(s, batch).seconds
    c, v = t_q / t_p, target_pass(s, batch, k + 1).seconds / t_p
    return c, v, expected_tokens(s.alpha, k) / (k * c + v)


@pytest.mark.parametrize("zero", [NONE, Overheads(0.0, 0.0, 0.0, 0.0, source="typed in")])
def test_all_zero_overheads_give_exactly_the_ideal_rooflines_numbers(zero):
    s = replace(A100_8, overheads=zero)
    for batch in (1, 32, 256):
        for k in (1, 4, 8):
            assert costs(s, batch, k) == ideal(s, batch, k)[:2]
            assert speedup_at(s, batch, k) == ideal(s, batch, k)[2]
    r = roofline(s, 32)
    assert (r.c, r.v, r.speedup) == ideal(s, 32, 4)
    assert r.t_step_ms == r.t_target_ms
    assert r.launch_ms == r.draft_launch_ms == r.sample_ms == r.spec_overhead_ms == 0
    assert r.tok_s_base == 1 / target_pass(s, 32).seconds
    assert r.verify_pass.overhead_ms == 0 and r.verify_pass.total_ms == r.verify_pass.ms
    assert roofline_cycle(s)(32, 4) == 4 * ideal(s, 32, 4)[0] + ideal(s, 32, 4)[1]


def test_a_known_overhead_shifts_the_speedup_as_the_formula_says():
    s = replace(A100_8, overheads=KNOWN)
    batch, k = 32, 4
    t_p, t_q = target_pass(s, batch).seconds, draft_pass(s, batch).seconds
    t_v = target_pass(s, batch, k + 1).seconds
    sampler, o_spec = 3e-6 * batch, 0.5e-3 + 10e-6 * batch
    step = t_p + L_P + sampler
    by_hand = expected_tokens(0.7, k) * step / (k * (t_q + L_Q) + t_v + L_P + sampler + o_spec)
    assert speedup_at(s, batch, k) == pytest.approx(by_hand, rel=1e-12)
    assert speedup_at(s, batch, k) == pytest.approx(
        overheads.speedup(expected_tokens(0.7, k), t_q, t_v, t_p, k, KNOWN, batch, 16, 32),
        rel=1e-12)
    # c and v stay in plain steps: the draft with its own launch, the rest in v
    c, v = costs(s, batch, k)
    assert c == pytest.approx((t_q + L_Q) / step) and v == pytest.approx(
        (t_v + L_P + sampler + o_spec) / step)
    r = roofline(s, batch)
    assert r.speedup == pytest.approx(by_hand, rel=1e-12)
    assert r.t_step_ms == pytest.approx(step * 1e3)
    assert r.tok_s_base == pytest.approx(1 / step)
    assert r.target_pass.overhead_ms == pytest.approx((L_P + sampler) * 1e3)
    assert r.draft_pass.overhead_ms == pytest.approx(L_Q * 1e3)
    assert r.verify_pass.overhead_ms == pytest.approx((L_P + sampler + o_spec) * 1e3)
    # the ideal roofline prices this setting well above what the overheads leave
    assert by_hand < ideal(s, batch, k)[2]


def test_the_break_even_search_with_overheads_finds_what_a_scan_of_every_batch_finds():
    for o in (KNOWN, Overheads(spec_fixed_s=1e-3), Overheads(sample_s_per_row=50e-6)):
        for alpha, context in ((0.6, 512), (0.8, 4000)):
            s = replace(A100_8, overheads=o, alpha=alpha, context=context, gpus=1)
            scan = next((b for b in range(1, 1025) if speedup_at(s, b) <= 1), None)
            assert break_even_batch(s) == scan
            lookup_scan = next((b for b in range(1, 1025)
                                if lookup_speedup_at(s, b, 1.0) <= 1), None)
            assert lookup_break_even_batch(s) == lookup_scan


def test_prompt_lookup_pays_the_speculative_step_every_cycle_proposal_or_not():
    s = replace(A100_8, overheads=KNOWN)
    batch, k, pi = 16, 4, 0.4
    step = target_pass(s, batch).seconds + L_P + 3e-6 * batch
    v = (target_pass(s, batch, k + 1).seconds + L_P + 3e-6 * batch) / step
    c = (0.5e-3 + 10e-6 * batch) / step
    assert lookup_speedup_at(s, batch, pi) == pytest.approx(lookup_speedup(0.7, k, pi, c, v))
    # at pi = 0 nothing is proposed, yet the speculative step is paid: below 1x
    assert lookup_speedup_at(s, batch, 0.0) == pytest.approx(1 / (1 + c))


def test_a_launch_time_makes_a_cheap_draft_dearer_and_can_change_the_best_k():
    s = replace(A100_8, gpus=1, context=512)
    dear = replace(s, overheads=Overheads(launch_s_per_layer=100e-6))
    assert costs(dear, 8)[0] > costs(s, 8)[0]  # the draft step launches its own layers
    assert best_k_at(dear, 8)[0] <= best_k_at(s, 8)[0]


# ---- the defaults ----------------------------------------------------------------------------


def test_a_presets_default_is_the_published_fit_at_its_own_fractions():
    for shares in ((ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS), (1.0, 1.0), (0.5, 0.6)):
        got = default_overheads.preset_overheads(replace(
            A100_8, bw_share=shares[0], flops_share=shares[1]))
        fit = validate.fit(published.load_all(), shares).overheads("vllm")
        assert replace(got, source="") == replace(fit, source="")
        assert f"{shares[0]:g} of the bandwidth" in got.source
    # at the datasheet's rates the fit finds the launch time it finds at "datasheet"
    datasheet = validate.fit(published.load_all(), "datasheet").terms
    assert default_overheads.fitted(1.0, 1.0).launch_s_per_layer == datasheet.launch_s_per_layer > 0


def test_a_schedules_cost_comes_from_vllm_issue_49548_and_only_vllm_pays_it():
    o = default_overheads.fitted(ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS)
    arms = {(p["arm"], p["batch"]): p["value"] for p in json.loads(
        (published.FOLDER / "vllm-issue-49548.json").read_text())["series"][0]["points"]}
    for batch in (2, 189):  # two batches, two terms: the line passes through both
        assert (o.schedule_fixed_s + o.schedule_per_row_s * batch) * 1e3 == pytest.approx(
            arms[("dsd_k0", batch)] - arms[("no_spec", batch)])
    for engine in ("sglang", "gpt-fast"):
        other = default_overheads.fitted(ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS, engine)
        assert other.schedule_fixed_s == other.schedule_per_row_s == 0.0
        assert other.launch_s_per_layer == o.launch_s_per_layer  # the pass terms are shared


def test_measured_hardware_has_no_fitted_default_of_its_own():
    s = replace(A100_8, hardware=HARDWARE["this-machine"])
    assert default_overheads.preset_overheads(s) is NONE
