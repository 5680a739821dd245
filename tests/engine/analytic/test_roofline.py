"""The roofline model: limits, the break-even search against a scan, monotonicity, presets."""

from __future__ import annotations

import json
import random
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from engine.analytic import theory
from engine.analytic.roofline import (
    BATCH_MAX,
    HARDWARE,
    MODELS,
    PAIRS,
    Hardware,
    ModelShape,
    Setting,
    best_k_at,
    break_even_batch,
    costs,
    forward_pass,
    ridge_tokens,
    roofline,
    speedup_at,
)

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
    assert v == pytest.approx(1.0, abs=1e-12)  # k + 1 = 5 tokens are far below the ridge
    assert c == pytest.approx(s.draft.params / s.target.params, rel=1e-12)
    assert speedup_at(s, 1) == pytest.approx(theory.speedup(s.alpha, s.k, c, 1.0))


def test_batch_one_with_context_keeps_v_near_one_and_c_near_the_parameter_ratio():
    s = setting(context=1024)
    c, v = costs(s, 1)
    assert v == pytest.approx(1.0, abs=1e-9)
    assert c == pytest.approx(s.draft.params / s.target.params, rel=0.02)


def test_large_batch_makes_verification_cost_k_plus_one_and_speculation_lose():
    s = setting(context=0, k=4)
    c, v = costs(s, BATCH_MAX)
    assert v == pytest.approx(s.k + 1, rel=1e-9)
    assert c == pytest.approx(s.draft.params / s.target.params, rel=1e-9)  # both compute-bound
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


# ---- monotonicity ----


def test_pass_time_grows_with_batch_and_with_tokens():
    s = setting(context=512)
    for model in (s.target, s.draft):
        times = [forward_pass(model, s, b, 1).seconds for b in range(1, 2049, 7)]
        assert times == sorted(times)
        per_tokens = [forward_pass(model, s, 64, t).seconds for t in range(1, 18)]
        assert per_tokens == sorted(per_tokens)


def test_speedup_never_grows_with_batch_without_context():
    for pair in PAIRS:
        s = setting(pair=pair, context=0)
        values = [speedup_at(s, b) for b in range(1, BATCH_MAX + 1)]
        assert all(b <= a + 1e-12 for a, b in zip(values, values[1:], strict=False))


def test_break_even_moves_later_with_better_acceptance_and_longer_context():
    def later_or_never(values: list[int | None]) -> bool:
        keyed = [BATCH_MAX + 1 if v is None else v for v in values]
        return keyed == sorted(keyed)

    assert later_or_never([break_even_batch(setting(context=256, alpha=a / 10))
                           for a in range(1, 11)])
    assert later_or_never([break_even_batch(setting(context=n))
                           for n in (0, 128, 256, 512, 1024, 4096)])


def test_more_gpus_keep_the_ridge_and_scale_the_times_down():
    one, eight = setting(gpus=1), setting(gpus=8)
    assert ridge_tokens(one) == pytest.approx(ridge_tokens(eight))
    assert forward_pass(one.target, one, 4, 1).seconds == pytest.approx(
        8 * forward_pass(eight.target, eight, 4, 1).seconds)


def test_best_k_at_batch_one_is_the_slider_models_best_k():
    for alpha in (0.3, 0.6, 0.8, 0.95):
        s = setting(context=0, alpha=alpha)
        c, v = costs(s, 1)
        assert best_k_at(s, 1) == pytest.approx(theory.best_k(alpha, c, v))


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
    kv_p = 2 * 32 * 8 * 128 * 2  # bytes per cached token: k and v, 32 layers, 8 heads of 128
    kv_q = 2 * 16 * 8 * 64 * 2
    target_bytes = n_p * 2 + 1024 * kv_p  # 16,194,740,224
    draft_bytes = n_q * 2 + 1024 * kv_q  # 2,505,183,232
    assert r.t_target_ms == pytest.approx(target_bytes / 3.35e12 * 1e3)  # 4.834 ms
    assert r.t_target_ms == pytest.approx(4.8342, abs=1e-4)
    assert r.t_draft_ms == pytest.approx(0.7478, abs=1e-4)
    assert r.t_verify_ms == pytest.approx(r.t_target_ms)  # 5 tokens: still memory-bound
    assert r.c == pytest.approx(draft_bytes / target_bytes)  # 0.1547
    assert r.c == pytest.approx(0.1547, abs=1e-4)
    tokens = 1 + 0.7 + 0.49 + 0.343 + 0.2401  # 2.7731
    assert r.speedup == pytest.approx(tokens / (4 * r.c + 1))  # 1.713
    assert r.speedup == pytest.approx(1.7131, abs=1e-4)
    assert r.tok_s_base == pytest.approx(1000 / 4.8342, rel=1e-4)  # 206.9 tok/s
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
    from engine.analytic.roofline import TimedPass, fit_hardware

    truth = Setting(Hardware("truth", 3e9, {"bf16": 40e9}), MODELS["shipped-target"],
                    MODELS["shipped-draft"], "fp32", context=128)
    passes = [TimedPass(m, b, t, 128, forward_pass(m, truth, b, t).seconds)
              for m in (truth.target, truth.draft) for b in (1, 2, 4, 8, 16, 32, 64)
              for t in (1, 3, 5)]
    bandwidth, flops = fit_hardware(passes, "fp32")
    assert bandwidth == pytest.approx(3e9, rel=0.05)
    assert flops == pytest.approx(40e9, rel=0.05)
