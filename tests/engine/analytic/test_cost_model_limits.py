"""Limits the cost model must keep whatever the data say: with the fitted pass terms (gpt-fast's:
launch and all-reduce depth) a draft's c(B) follows the ratio of the bytes the two passes read
while both are bandwidth-bound and the ratio of their FLOPs once both are compute-bound; an
engine's fixed times (vLLM's) move c only by those times over a step, and never near 1 for a
draft an eighth of the target's size; verifying k + 1 tokens in a compute-bound pass costs
about k + 1 plain steps, and tensor parallelism speeds a small model less than a big one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.analytic.break_even import costs, draft_step_s, step_s, verify_step_s
from engine.analytic.default_overheads import fitted
from engine.analytic.passes import Setting, draft_pass, target_pass
from engine.analytic.presets import ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS, HARDWARE, MODELS, PAIRS

DEFAULTS = fitted(ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS, "vllm")
PASS_TERMS = fitted(ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS, "gpt-fast")


def setting(pair: str = "llama-8b-1b", hardware: str = "h100-sxm", **changes) -> Setting:
    p = PAIRS[pair]
    return replace(Setting(HARDWARE[hardware], p.target, p.draft, alpha=0.8, k=4,
                           bw_share=ACHIEVED_BANDWIDTH, flops_share=ACHIEVED_FLOPS,
                           overheads=DEFAULTS), **changes)


@pytest.mark.parametrize("context", [0, 512, 8192])
def test_c_follows_the_bytes_while_both_passes_are_bandwidth_bound(context):
    s = setting(context=context, overheads=PASS_TERMS)
    for batch in (1, 4, 16):
        q, p = draft_pass(s, batch), target_pass(s, batch)
        assert q.bound == p.bound == "memory"
        c, _ = costs(s, batch)
        assert c == pytest.approx(q.bytes / p.bytes, rel=0.05)


def test_c_follows_the_flops_once_both_passes_are_compute_bound():
    s = setting(context=0, overheads=PASS_TERMS)
    batch = 1024
    q, p = draft_pass(s, batch), target_pass(s, batch)
    assert q.bound == p.bound == "compute"
    c, _ = costs(s, batch)
    assert c == pytest.approx(q.flops / p.flops, rel=0.05)


@pytest.mark.parametrize("batch", [1, 16, 1024])
def test_an_engines_fixed_times_move_c_by_those_times_over_a_step_and_no_more(batch):
    s, bare = setting(context=512), setting(context=512, overheads=PASS_TERMS)
    o = s.overheads
    assert o.draft_fixed_s > 0 and o.step_fixed_s > 0
    c, _ = costs(s, batch)
    bare_c, _ = costs(bare, batch)
    # c = (t_q + l_q + d) / (t_p + l_p + f): between the bare ratio and the fixed times' own
    assert min(bare_c, o.draft_fixed_s / o.step_fixed_s) <= c <= max(
        bare_c, o.draft_fixed_s / o.step_fixed_s)
    assert c == pytest.approx((draft_step_s(bare, batch) + o.draft_fixed_s)
                              / (step_s(bare, batch) + o.step_fixed_s), rel=1e-9)


@pytest.mark.parametrize("context", [512, 8192])
def test_a_draft_an_eighth_of_the_target_never_costs_near_a_step(context):
    s = setting(context=context)
    assert s.draft.params < s.target.params / 6
    for batch in (1, 8, 64, 256, 1024):
        assert costs(s, batch)[0] < 0.3, batch


def test_a_large_drafts_pass_on_eight_gpus_costs_a_small_share_of_a_70b_step():
    s = setting("llama-70b-1b", gpus=8, context=8192)
    assert draft_step_s(s, 128) / step_s(s, 128) < 0.15


def test_verifying_k_plus_1_tokens_in_a_compute_bound_pass_costs_about_k_plus_1_steps():
    s = setting(context=0, overheads=replace(DEFAULTS, spec_fixed_s=0.0, spec_per_row_s=0.0))
    for k in (1, 4, 8):
        batch = 2048
        assert target_pass(s, batch, k + 1).bound == "compute"
        assert verify_step_s(s, batch, k) / step_s(s, batch) == pytest.approx(k + 1, rel=0.02)


def test_tensor_parallelism_speeds_a_small_model_less_than_a_big_one():
    def scaling(model: str) -> float:
        m = MODELS[model]
        one, eight = (Setting(HARDWARE["h100-sxm"], m, m, gpus=g, context=512,
                              bw_share=ACHIEVED_BANDWIDTH,
                              flops_share=ACHIEVED_FLOPS, overheads=DEFAULTS)
                      for g in (1, 8))
        return step_s(one, 1) / step_s(eight, 1)

    small, middle, big = (scaling(m) for m in ("llama-3.2-1b", "llama-3.1-8b", "llama-3.1-70b"))
    assert 1 < small < middle < big < 8


def test_the_kv_cache_keeps_its_own_dtype_under_int4_weights():
    bf16, int4 = setting(context=32000), setting(context=32000, dtype="int4")
    assert int4.kv_cache_dtype == "bf16"
    kv = target_pass(bf16, 8).bytes - target_pass(replace(bf16, context=0), 8).bytes
    kv_int4 = target_pass(int4, 8).bytes - target_pass(replace(int4, context=0), 8).bytes
    assert kv_int4 == kv  # only the weights shrink
    assert target_pass(replace(int4, kv_dtype="fp8"), 8).bytes < target_pass(int4, 8).bytes


def test_a_pass_reads_its_tokens_rows_of_an_untied_input_table_not_the_table():
    m = MODELS["llama-3.1-8b"]
    assert m.input_table == 128_256 * 4096
    s = setting(context=0)
    one, two = target_pass(s, 1).bytes, target_pass(s, 2).bytes
    assert two - one == pytest.approx(m.width * 2)  # one more row, in bf16
    assert one < m.params * 2  # the table is not read whole
    assert MODELS["llama-3.2-1b"].input_table == 0  # tied: its LM head reads it all
