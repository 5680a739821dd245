"""The roofline model: limits, the break-even search against a scan, monotonicity, presets."""

from __future__ import annotations

import json
import random
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from engine.analytic import lookup, theory
from engine.analytic.break_even import (
    BATCH_MAX,
    best_k_at,
    break_even_batch,
    costs,
    lookup_break_even_batch,
    lookup_speedup_at,
    speedup_at,
)
from engine.analytic.memory import max_batch_that_fits, memory_at
from engine.analytic.passes import Setting, forward_pass, ridge_tokens
from engine.analytic.presets import HARDWARE, MODELS, PAIRS, Hardware, ModelShape
from engine.analytic.roofline import roofline

REPO = Path(__file__).resolve().parents[3]


def setting(pair: str = "llama-8b-1b", hardware: str = "h100-sxm", **changes) -> Setting:
    p = PAIRS[pair]
    return replace(Setting(HARDWARE[hardware], p.target, p.draft), **changes)


def scanned_break_even(s: Setting) -> int | None:
    return next((b for b in range(1, BATCH_MAX + 1) if speedup_at(s, b) <= 1.0), None)


# ---- limits ----


def test_batch_one_without_context_is_the_slider_model_with_c_the_parameter_ratio():
    s = setting(context=0)
    c, v = costs(s, 1)
    # k + 1 = 5 tokens are far below the ridge; only their embedding rows are read on top
    assert v == pytest.approx(1.0, rel=1e-5)
    assert c == pytest.approx(s.draft.streamed_params / s.target.streamed_params, rel=1e-5)
    assert speedup_at(s, 1) == pytest.approx(theory.speedup(s.alpha, s.k, c, 1.0), rel=1e-5)


def test_batch_one_with_context_keeps_v_near_one_and_c_near_the_parameter_ratio():
    s = setting(context=1024)
    c, v = costs(s, 1)
    assert v == pytest.approx(1.0, rel=1e-5)
    assert c == pytest.approx(s.draft.streamed_params / s.target.streamed_params, rel=0.02)


def test_large_batch_makes_verification_cost_k_plus_one_and_speculation_lose():
    s = setting(context=0, k=4)
    c, v = costs(s, BATCH_MAX)
    assert v == pytest.approx(s.k + 1, rel=1e-9)
    # both compute-bound: the ratio of their FLOPs (an untied input table does none)
    assert c == pytest.approx(s.draft.streamed_params / s.target.streamed_params, rel=1e-9)
    assert speedup_at(s, BATCH_MAX) < 1.0
    assert roofline(s, BATCH_MAX).bound == "compute"
    assert roofline(s, 1).bound == "memory"


def test_long_context_keeps_verification_memory_bound_and_speculation_paying():
    short, long = setting(context=256), setting(context=131072)
    assert costs(long, BATCH_MAX)[1] < 1.5
    assert speedup_at(long, BATCH_MAX) > 1.0 > speedup_at(short, BATCH_MAX)
    assert break_even_batch(long) is None
    assert break_even_batch(short) is not None


# ---- the break-even search ----


def test_break_even_equals_a_brute_force_scan_over_random_settings():
    rng = random.Random(9)
    found = {"none": 0, "one": 0, "inside": 0}
    for _ in range(300):
        s = setting(
            pair=rng.choice(list(PAIRS)), hardware=rng.choice(list(HARDWARE)),
            dtype=rng.choice(["bf16", "fp8", "int4", "fp32"]), gpus=rng.choice([1, 2, 4, 8]),
            context=rng.choice([0, 1, 100, 512, 2048, 8192, 65536]),
            alpha=rng.uniform(0.0, 1.0), k=rng.randint(1, 16),
        )
        expected = scanned_break_even(s)
        assert break_even_batch(s) == expected, s
        found["none" if expected is None else "one" if expected == 1 else "inside"] += 1
    assert min(found.values()) >= 10, found  # every kind of answer was exercised


def test_break_even_is_the_first_batch_where_speculation_stops_paying():
    s = setting(context=512)
    b = break_even_batch(s)
    assert b is not None and 1 < b < BATCH_MAX
    assert speedup_at(s, b) <= 1.0 < speedup_at(s, b - 1)


def test_lookup_break_even_equals_a_scan_and_is_never_below_the_draft_models():
    rng = random.Random(11)
    found = {"none": 0, "one": 0, "inside": 0, "later": 0}
    for _ in range(200):
        s = setting(
            pair=rng.choice(list(PAIRS)), hardware=rng.choice(list(HARDWARE)),
            dtype=rng.choice(["bf16", "fp8", "int4", "fp32"]), gpus=rng.choice([1, 2, 4, 8]),
            context=rng.choice([0, 1, 100, 512, 2048, 8192, 65536]),
            alpha=rng.uniform(0.0, 1.0), k=rng.randint(1, 16),
        )
        pi = rng.uniform(0.05, 1.0)
        scanned = next((b for b in range(1, BATCH_MAX + 1)
                        if lookup_speedup_at(s, b, pi) <= 1.0), None)
        ours, model = lookup_break_even_batch(s), break_even_batch(s)
        assert ours == scanned, (s, pi)
        assert model is not None or ours is None  # it pays wherever the draft model does
        if ours is not None and model is not None:
            assert ours >= model
        found["none" if ours is None else "one" if ours == 1 else "inside"] += 1
        found["later"] += ours != model
    assert min(found.values()) >= 10, found


def test_lookup_at_batch_b_is_the_lookup_model_with_v_of_b_and_no_draft_cost():
    s = setting(context=512, alpha=0.8, k=5)
    for batch in (1, 16, 256):
        _, v = costs(s, batch)
        assert lookup_speedup_at(s, batch, 0.3) == pytest.approx(
            lookup.speedup(0.8, 5, 0.3, 0.0, v))
    assert lookup_speedup_at(s, 64, 0.0) == 1.0  # no proposal: plain decoding


def test_without_draft_passes_the_break_even_batch_is_higher():
    s = setting(context=512)
    model, ngram = break_even_batch(s), lookup_break_even_batch(s)
    assert model is not None and ngram is not None and ngram > model
    assert roofline(s, 8).lookup_break_even_batch == ngram
    assert lookup_speedup_at(s, ngram, 0.5) <= 1.0 < lookup_speedup_at(s, ngram - 1, 0.5)


# ---- monotonicity ----


def test_pass_time_grows_with_batch_and_with_tokens():
    s = setting(context=512)
    for model in (s.target, s.draft):
        times = [forward_pass(model, s, b, 1).seconds for b in range(1, 2049, 7)]
        assert times == sorted(times)
        per_tokens = [forward_pass(model, s, 64, t).seconds for t in range(1, 18)]
        assert per_tokens == sorted(per_tokens)


def test_speedup_never_grows_with_batch_without_context():
    """A dense target's; a mixture of experts' grows at a small batch, where verifying k + 1
    tokens a row reads more experts than one token does and a larger batch reads them all
    anyway."""
    for pair, p in PAIRS.items():
        s = setting(pair=pair, context=0)
        values = [speedup_at(s, b) for b in range(1, BATCH_MAX + 1)]
        never_grows = all(b <= a + 1e-12 for a, b in zip(values, values[1:], strict=False))
        assert never_grows == (p.target.experts == 0), pair


def test_break_even_moves_later_with_better_acceptance_and_longer_context():
    def later_or_never(values: list[int | None]) -> bool:
        keyed = [BATCH_MAX + 1 if v is None else v for v in values]
        return keyed == sorted(keyed)

    assert later_or_never([break_even_batch(setting(context=256, alpha=a / 10))
                           for a in range(1, 11)])
    assert later_or_never([break_even_batch(setting(context=n))
                           for n in (0, 128, 256, 512, 1024, 4096)])


def test_more_gpus_keep_the_ridge_split_memory_and_compute_and_add_communication():
    one, eight = setting(gpus=1), setting(gpus=8)
    assert ridge_tokens(one) == pytest.approx(ridge_tokens(eight))
    p1, p8 = forward_pass(one.target, one, 4, 1), forward_pass(one.target, eight, 4, 1)
    assert p1.memory_s == pytest.approx(8 * p8.memory_s)  # 8 KV heads: they split 8 ways too
    assert p1.compute_s == pytest.approx(8 * p8.compute_s)
    assert p1.communication_s == 0 and p8.communication_s > 0
    assert p8.seconds == pytest.approx(p8.memory_s + p8.communication_s)


# ---- tensor parallelism ----


def _todays_pass(model: ModelShape, s: Setting, batch: float, tokens: int) -> tuple[float, float]:
    """The one-GPU pass as the model priced it before communication and memory capacity."""
    # int4: a bf16 scale and zero point a group of 128 weights besides the half byte
    b = {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5 + 4 / 128, "fp32": 4.0}[s.dtype]
    kv = 4.0 if s.dtype == "fp32" else 2.0  # the KV cache stays bf16 under fp8, int8, int4
    weights = model.params - model.input_table
    routed = model.expert_params  # a mixture of experts: the routed experts' share
    share = model.experts_per_token / model.experts if model.experts else 1.0
    touched = 1 - (1 - share) ** (batch * tokens)
    rows = batch * tokens * model.width * 2.0 if model.input_table else 0.0
    read = (weights - routed * (1 - touched)) * b + rows + batch * s.context * 2 \
        * model.layers * model.kv_heads * model.head_dim * kv
    flops = batch * tokens * (2 * (weights - routed * (1 - share)) + 4 * s.context
                              * model.heads * model.head_dim * model.layers)
    return read / s.hardware.bandwidth, flops / s.hardware.peak_flops(s.dtype)


def test_one_gpu_prices_every_pass_exactly_as_without_tensor_parallelism():
    rng = random.Random(2)
    for _ in range(100):
        s = setting(pair=rng.choice(list(PAIRS)), hardware=rng.choice(list(HARDWARE)),
                    dtype=rng.choice(["bf16", "fp8", "int8", "int4", "fp32"]),
                    context=rng.choice([0, 512, 8192, 131072]), k=rng.randint(1, 16))
        batch = rng.choice([1, 7, 64, 1024])
        for model, tokens in ((s.target, 1), (s.target, s.k + 1), (s.draft, 1)):
            memory_s, compute_s = _todays_pass(model, s, batch, tokens)
            p = forward_pass(model, s, batch, tokens)
            assert (p.memory_s, p.compute_s, p.communication_s) == (memory_s, compute_s, 0.0)
            assert p.seconds == max(memory_s, compute_s)


def test_a_small_model_on_eight_gpus_is_communication_bound():
    s = setting("qwen-7b-0.5b", gpus=8, context=512)
    r = roofline(s, 1)
    assert r.draft_pass.bound == "communication"
    assert r.draft_pass.communication_ms > r.draft_pass.memory_ms
    # 24 layers, two all-reduces each, at least the 10 us latency each
    assert r.draft_pass.communication_ms >= 48 * 0.010
    alone = roofline(replace(s, draft_sharded=False), 1)
    assert alone.draft_pass.communication_ms == 0 and alone.draft_pass.gpus == 1
    assert alone.t_draft_ms < r.t_draft_ms  # on one GPU the small draft is faster


def test_kv_heads_past_the_gpu_count_are_replicated_in_the_pass_too():
    s4, s8 = setting("qwen-7b-0.5b", gpus=4, context=65536), setting("qwen-7b-0.5b", gpus=8,
                                                                      context=65536)
    kv_read = {g: forward_pass(s.target, s, 16, 1).bytes
               - forward_pass(s.target, replace(s, context=0), 16, 1).bytes
               for g, s in ((4, s4), (8, s8))}
    assert kv_read[8] == pytest.approx(kv_read[4])  # 4 KV heads: one a GPU from G = 4 on


def test_the_link_latency_is_a_parameter_and_a_slow_link_costs_more():
    s = setting(gpus=8, context=1024)
    slow = replace(s, hardware=replace(s.hardware, link_bandwidth=s.hardware.link_bandwidth / 10))
    assert roofline(slow, 64).t_target_ms > roofline(s, 64).t_target_ms
    zero = replace(s, latency_s=0.0)
    assert roofline(s, 1).target_pass.communication_ms - roofline(zero, 1).target_pass \
        .communication_ms == pytest.approx(2 * 32 * 0.010)


def test_hand_computed_llama_8b_with_1b_on_eight_h100s_at_batch_64():
    s = setting(gpus=8, context=1024, k=4)
    r = roofline(s, 64)
    n_p, n_q = 8_030_261_248, 1_235_814_400
    table = 128_256 * 4096  # the 8B's untied input embedding: 64 of its rows are read
    # one KV head of 128 (8B) or 64 (1B) on each GPU
    target_read = ((n_p - table) * 2 + 64 * 4096 * 2) / 8 + 64 * 1024 * (2 * 32 * 1 * 128 * 2)
    assert r.target_pass.memory_ms == pytest.approx(target_read / 3.35e12 * 1e3)  # 0.8806 ms
    assert r.target_pass.memory_ms == pytest.approx(0.8806, abs=1e-4)
    flops = 64 * (2 * (n_p - table) + 4 * 1024 * 32 * 128 * 32) / 8
    assert r.target_pass.compute_ms == pytest.approx(flops / 989e12 * 1e3)  # 0.1258 ms
    # 64 all-reduces of 64 x 4096 bf16 values, 2 x 7/8 of them over 450 GB/s, + 10 us each
    comm = 2 * 32 * (2 * 7 / 8 * 64 * 4096 * 2 / 450e9 + 10e-6)
    assert r.target_pass.communication_ms == pytest.approx(comm * 1e3)  # 0.7705 ms
    assert r.target_pass.communication_ms == pytest.approx(0.7705, abs=1e-4)
    assert r.t_target_ms == pytest.approx(1.6511, abs=1e-4)
    assert r.target_pass.bound == "memory"
    draft_read = n_q * 2 / 8 + 64 * 1024 * (2 * 16 * 1 * 64 * 2)
    draft_comm = 2 * 16 * (2 * 7 / 8 * 64 * 2048 * 2 / 450e9 + 10e-6)
    assert r.t_draft_ms == pytest.approx((draft_read / 3.35e12 + draft_comm) * 1e3)  # 0.5250
    assert r.draft_pass.bound == "communication"
    assert r.c == pytest.approx(0.5250 / 1.6511, abs=1e-3)


def test_best_k_at_batch_one_is_the_slider_models_best_k():
    for alpha in (0.3, 0.6, 0.8, 0.95):
        s = setting(context=0, alpha=alpha)
        c, v = costs(s, 1)
        assert best_k_at(s, 1) == pytest.approx(theory.best_k(alpha, c, v), rel=1e-5)


# ---- memory capacity ----


def test_hand_computed_memory_of_llama_70b_with_1b_on_one_h100_at_context_8192():
    s = setting("llama-70b-1b", context=8192, k=4)
    n_p, n_q = MODELS["llama-3.1-70b"].params, MODELS["llama-3.2-1b"].params
    kv_p, kv_q = 2 * 80 * 8 * 128 * 2, 2 * 16 * 8 * 64 * 2  # 327,680 and 32,768 bytes a token
    m = memory_at(s, 3)
    assert m.weights == (n_p + n_q) * 2  # 143.6 GB
    assert m.kv_cache == 3 * (8192 + 5) * (kv_p + kv_q)  # 8.85 GB
    assert m.available == 80e9 * 0.9
    assert not m.fits and max_batch_that_fits(s) is None
    assert max_batch_that_fits(s, with_draft=False) is None  # 141 GB of weights alone


def test_weights_and_the_kv_cache_split_across_gpus_and_kv_heads_replicate_past_their_count():
    for gpus in (1, 2, 4, 8):
        s = setting("qwen-7b-0.5b", gpus=gpus)
        assert memory_at(s, 1).weights == pytest.approx(memory_at(setting("qwen-7b-0.5b"), 1)
                                                        .weights / gpus)
    target, draft = MODELS["qwen2.5-7b"], MODELS["qwen2.5-0.5b"]  # 4 and 2 KV heads
    per_gpu = {g: target.kv_bytes_per_token("bf16", g) for g in (1, 2, 4, 8)}
    assert per_gpu[2] == per_gpu[1] / 2 and per_gpu[4] == per_gpu[1] / 4
    assert per_gpu[8] == per_gpu[4]  # one head each: replicated, not split further
    assert draft.kv_bytes_per_token("bf16", 2) == draft.kv_bytes_per_token("bf16", 8)
    assert draft.kv_bytes_per_token("bf16", 2) == draft.kv_bytes_per_token("bf16") / 2


def test_the_largest_batch_that_fits_equals_a_scan():
    rng = random.Random(4)
    for _ in range(60):
        s = setting(pair=rng.choice(list(PAIRS)), hardware=rng.choice(list(HARDWARE)[:5]),
                    dtype=rng.choice(["bf16", "fp8", "int8", "int4", "fp32"]),
                    gpus=rng.choice([1, 2, 4, 8]), context=rng.choice([0, 512, 8192, 131072]),
                    usable=rng.uniform(0.5, 1.0))
        most = max_batch_that_fits(s, limit=4096)
        scanned = [b for b in range(1, 4097) if memory_at(s, b).fits]
        assert most == (scanned[-1] if scanned else None), s
        assert scanned == list(range(1, len(scanned) + 1))  # memory grows with the batch


def test_the_draft_costs_sequences_and_the_curve_marks_batches_past_the_limit():
    s = setting("llama-70b-1b", gpus=8, context=8192)
    r = roofline(s, 32)
    assert r.fits and r.max_batch_that_fits is not None
    assert r.max_batch_without_draft > r.max_batch_that_fits
    assert not memory_at(s, r.max_batch_that_fits + 1).fits
    assert [p.fits for p in r.curve] == [p.batch <= r.max_batch_that_fits for p in r.curve]
    assert not roofline(s, r.max_batch_that_fits + 1).fits


def test_unknown_memory_never_limits_the_batch():
    s = setting(hardware="h100-sxm")
    s = replace(s, hardware=Hardware("custom", 1e12, {"bf16": 1e12}))
    assert max_batch_that_fits(s) == 65_536 and roofline(s, 8).fits


# ---- presets ----


def test_parameter_counts_match_the_published_sizes():
    published = {  # the sizes the model cards state, to the digits they state
        "llama-3.1-70b": 70.6e9, "llama-3.1-8b": 8.03e9, "llama-3.2-1b": 1.24e9,
        "qwen2.5-7b": 7.61e9, "qwen2.5-0.5b": 0.49e9,
    }
    for name, size in published.items():
        assert MODELS[name].params == pytest.approx(size, rel=0.01), name


def _safetensors_parameters(path: Path) -> int:
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    total = 0
    for name, entry in header.items():
        if name != "__metadata__":
            n = 1
            for dim in entry["shape"]:
                n *= dim
            total += n
    return total


@pytest.mark.parametrize("which", ["target", "draft"])
def test_shipped_shapes_match_the_shipped_weights_and_config(which):
    shape = MODELS[f"shipped-{which}"]
    folder = REPO / "models" / which
    assert shape.params == _safetensors_parameters(folder / "model.safetensors")
    config = json.loads((folder / "config.json").read_text())
    assert (shape.layers, shape.heads, shape.kv_heads, shape.head_dim) == (
        config["num_hidden_layers"], config["num_attention_heads"],
        config["num_key_value_heads"], config["head_dim"])


def test_hand_computed_llama_8b_with_1b_on_one_h100_at_context_1024():
    s = setting(context=1024, alpha=0.7, k=4)
    r = roofline(s, 1)
    n_p, n_q = 8_030_261_248, 1_235_814_400
    table = 128_256 * 4096  # the 8B's untied input embedding, of which a pass reads its rows
    kv_p = 2 * 32 * 8 * 128 * 2  # bytes per cached token: k and v, 32 layers, 8 heads of 128
    kv_q = 2 * 16 * 8 * 64 * 2
    target_bytes = (n_p - table) * 2 + 4096 * 2 + 1024 * kv_p  # 15,144,075,264
    draft_bytes = n_q * 2 + 1024 * kv_q  # 2,505,183,232 (the 1B's table is its LM head)
    assert r.t_target_ms == pytest.approx(target_bytes / 3.35e12 * 1e3)  # 4.521 ms
    assert r.t_target_ms == pytest.approx(4.5206, abs=1e-4)
    assert r.t_draft_ms == pytest.approx(0.7478, abs=1e-4)
    assert r.t_verify_ms == pytest.approx(r.t_target_ms, rel=1e-5)  # 5 tokens: memory-bound
    assert r.c == pytest.approx(draft_bytes / target_bytes)  # 0.1654
    assert r.c == pytest.approx(0.1654, abs=1e-4)
    tokens = 1 + 0.7 + 0.49 + 0.343 + 0.2401  # 2.7731
    assert r.speedup == pytest.approx(tokens / (4 * r.c + 1), rel=1e-5)  # 1.669
    assert r.speedup == pytest.approx(1.6688, abs=1e-4)
    assert r.tok_s_base == pytest.approx(1000 / 4.5206, rel=1e-4)  # 221.2 tok/s
    assert r.ridge_tokens == pytest.approx(989 * 2 / (2 * 3.35))  # 295.2 tokens per pass
    assert (r.bound, r.target_bound, r.draft_bound) == ("memory", "memory", "memory")


def test_curve_covers_powers_of_two_and_matches_the_point_figures():
    s = setting(context=512)
    r = roofline(s, 64)
    assert [p.batch for p in r.curve] == [2**i for i in range(11)]
    at64 = next(p for p in r.curve if p.batch == 64)
    assert (at64.speedup, at64.c, at64.v) == pytest.approx((r.speedup, r.c, r.v))
    assert r.tok_s_spec_total == pytest.approx(64 * r.tok_s_base * r.speedup)


def test_custom_shapes_and_hardware_work_like_presets():
    tiny = ModelShape("tiny", 1_000_000, 2, 2, 2, 16)
    fast = Hardware("custom", 1e12, {"bf16": 1e12})
    s = Setting(fast, MODELS["llama-3.2-1b"], tiny, context=0)
    assert ridge_tokens(s) == pytest.approx(1.0)  # F b / (2 BW) = 1e12 * 2 / 2e12
    assert break_even_batch(s) == scanned_break_even(s)


def test_the_fit_recovers_the_hardware_that_made_the_times():
    from engine.analytic.fit import TimedPass, fit_hardware

    truth = Setting(Hardware("truth", 3e9, {"bf16": 40e9}), MODELS["shipped-target"],
                    MODELS["shipped-draft"], "fp32", context=128)
    passes = [TimedPass(m, b, t, 128, forward_pass(m, truth, b, t).seconds)
              for m in (truth.target, truth.draft) for b in (1, 2, 4, 8, 16, 32, 64)
              for t in (1, 3, 5)]
    bandwidth, flops = fit_hardware(passes, "fp32")
    assert bandwidth == pytest.approx(3e9, rel=0.05)
    assert flops == pytest.approx(40e9, rel=0.05)


# ---- achieved, not peak ----


def test_achieved_fractions_scale_memory_and_compute_times_and_leave_measured_rates_alone():
    from engine.analytic import presets

    assert round(presets.ACHIEVED_BANDWIDTH * 2039) == 1397  # GB/s: gpt-fast, A100 80 GB
    assert round(presets.ACHIEVED_FLOPS * 989) == 792  # TFLOP/s: MAMF, H100 SXM (792.1)
    peak = setting(context=1024)
    real = replace(peak, bw_share=0.5, flops_share=0.25)
    p, r = forward_pass(peak.target, peak, 512, 5), forward_pass(real.target, real, 512, 5)
    assert r.memory_s == pytest.approx(2 * p.memory_s)
    assert r.compute_s == pytest.approx(4 * p.compute_s)
    assert ridge_tokens(real) == pytest.approx(ridge_tokens(peak) / 2)
    mine = setting("shipped", "this-machine")
    assert forward_pass(mine.target, replace(mine, bw_share=0.5), 8, 1) == \
        forward_pass(mine.target, mine, 8, 1)


def test_the_hardware_in_words_counts_gpus_but_not_this_machine():
    from engine.analytic.presets import devices

    assert devices(1, "H100 SXM") == "one H100 SXM"
    assert devices(8, "H100 SXM") == "8 × H100 SXM"
    assert devices(1, "this machine (2-core CPU)") == "this machine (2-core CPU)"
