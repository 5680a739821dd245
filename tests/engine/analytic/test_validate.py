"""The cost model against published measurements: the split is the one fixed in the data, the
fit reproduces what it was fitted on, and no held-out series misses by more than 25 % without
docs/design.md saying which and why."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine import cli
from engine.analytic import drafters, own_sweeps, passes, published, shapes, validate
from engine.analytic.presets import HARDWARE
from engine.analytic.validate import EXPLAINED_MISSES, HELD_OUT_LIMIT

REPO = Path(__file__).resolve().parents[3]
REPORT = validate.run()
HELD_OUT = [r for r in REPORT.series if r.split == "held_out"]


def test_every_fitted_and_held_out_series_is_reported():
    # the published sources and this project's own shipped sweeps (all held out)
    series = published.all_series(published.load_all() + own_sweeps.sources())
    compared = {i for i, s in series.items() if s.split in ("fit", "held_out")}
    assert {r.id for r in REPORT.series} == compared
    assert {r.split for r in REPORT.series} == {"fit", "held_out"}


def test_the_fit_uses_only_the_rows_marked_fit():
    series = published.all_series(published.load_all())
    fit_points = sum(len(s.points) for s in series.values() if s.split == "fit")
    f = REPORT.fit
    assert f.pass_fit.rows == len(validate.pass_fit_rows(series)) == 14  # gpt-fast's
    assert f.step_fit.rows == 2 and f.cycle_fit.rows == 6  # vLLM's plain steps, its chains
    assert f.pass_fit.rows + f.step_fit.rows + f.cycle_fit.rows == fit_points


def test_the_fit_reproduces_the_rows_it_was_fitted_on():
    """Two terms over 14 steps of five models and GPU counts, one over two vLLM steps, two
    over six vLLM cycles: each series within 10 %."""
    fitted = [r for r in REPORT.series if r.split == "fit"]
    assert fitted and all(r.median_abs_error < 0.10 for r in fitted)
    assert REPORT.fit.pass_fit.rms < 0.10  # relative to a step


def test_the_fitted_terms_are_physical_sizes():
    """At the achieved rates the launch is what CUDA graphs leave (microseconds a layer) and
    the all-reduce grows by microseconds a doubling of the GPUs, as NCCL's small messages do;
    vLLM's own times a step, a draft pass and a cycle are host work of tenths of a
    millisecond to a millisecond or two; no fit series varies the batch alone, so no time a
    row is fitted."""
    t = REPORT.fit.terms
    assert 0 <= t.launch_s_per_layer < 20e-6
    assert 1e-6 < t.allreduce_s_per_log2 < 20e-6
    for term in (t.vllm_step_fixed_s, t.vllm_draft_fixed_s, t.vllm_spec_fixed_s):
        assert 50e-6 < term < 3e-3
    assert REPORT.fit.overheads("vllm").sample_s_per_row == 0


def test_the_schedule_terms_reproduce_vllms_report():
    o = REPORT.fit.overheads("vllm")
    # issue 49548: 15.317 - 14.374 ms at concurrency 2, 93.820 - 77.164 ms at 189
    assert o.schedule_fixed_s + 2 * o.schedule_per_row_s == pytest.approx(0.943e-3, rel=1e-6)
    assert o.schedule_fixed_s + 189 * o.schedule_per_row_s == pytest.approx(16.656e-3,
                                                                            rel=1e-6)


def test_each_fit_source_left_out_is_reported_and_its_terms_fall_to_zero():
    left = {(x.source, x.series): x for x in REPORT.left_out}
    assert {source for source, _ in left} == {"gpt-fast-readme", "vllm-issue-20780",
                                              "vllm-pr-17202"}
    # without issue 20780 nothing prices vLLM's cycles: its chains miss by far more
    chains = left[("vllm-issue-20780", "vllm-issue20780-llama31-8b-eagle3")]
    assert chains.without_it > 3 * chains.with_it
    without = validate.fit([s for s in published.load_all() if s.id != "vllm-issue-20780"])
    assert without.terms.vllm_draft_fixed_s == without.terms.vllm_spec_fixed_s == 0.0


def test_every_point_error_is_model_against_measured():
    for r in REPORT.series:
        for p in r.points:
            assert p.error == pytest.approx((p.model - p.measured) / p.measured)


@pytest.mark.parametrize("result", HELD_OUT, ids=[r.id for r in HELD_OUT])
def test_no_held_out_series_misses_by_more_than_25_percent_unexplained(result):
    if result.id in EXPLAINED_MISSES:
        assert result.median_abs_error > HELD_OUT_LIMIT, (
            f"{result.id} no longer misses: take it off EXPLAINED_MISSES and the docs")
    else:
        assert result.median_abs_error <= HELD_OUT_LIMIT, (
            f"{result.id} misses by {result.median_abs_error:.0%}: explain it in "
            "docs/design.md and EXPLAINED_MISSES, do not tune the model to it")


def test_the_docs_explain_every_explained_miss():
    design = (REPO / "docs" / "design.md").read_text()
    section = design.split("## Held against published measurements", 1)[1].split("\n## ", 1)[0]
    for series_id in EXPLAINED_MISSES:
        assert f"`{series_id}`" in section


def test_the_report_prints_every_series_with_its_median_error():
    text = validate.format_report(REPORT)
    for r in REPORT.series:
        assert f"{r.id}  [{r.split}" in text
        assert f"median |error| {r.median_abs_error:.1%}" in text
    assert "Not in the stored material" in text and "Table 3" in text


def test_the_command_line_offers_the_same_rates():
    parser = cli.build_parser(cli.defaults())
    args = parser.parse_args(["validate"])
    assert args.rates == validate.DEFAULT_RATES
    action = next(a for a in parser._subparsers._group_actions[0].choices["validate"]._actions
                  if a.dest == "rates")
    assert sorted(action.choices) == sorted(validate.RATES)


def test_specscope_validate_prints_json_without_importing_torch():
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "engine.cli", "validate",
                           "--json"], capture_output=True, text=True, cwd=REPO, timeout=120,
                          check=True)
    assert not [line for line in done.stderr.splitlines() if line.endswith("| torch")]
    out = json.loads(done.stdout)
    assert {s["id"] for s in out["series"]} == {r.id for r in REPORT.series}


# ---- EAGLE-3 in SGLang at batch 64: a chain of the EAGLE-3 head, acceptance from batch 1 ----

EAGLE3 = "sglang-h100-llama-3.1-8b-eagle3-speedup"
SERIES = published.all_series(published.load_all())
SGLANG = REPORT.fit.overheads("sglang")


def _by_hand(batch: int, tokens_per_cycle: float | None = None) -> tuple[float, float]:
    """The cycle priced from the roofline's pieces: ``k`` head passes (one layer's launch
    each) and a verification over ``k + 1`` positions (the target's 32 layers' launch), the
    sampler once; no vLLM step terms. Returns the tokens a cycle that give SGLang's batch-1
    ratio, and the speedup."""
    series = SERIES[EAGLE3]
    (point,) = series.points
    o, k = SGLANG, series.fields["k"]
    s = validate.setting_for(series, point, o=o)
    head = drafters.EAGLE_HEADS[series.fields["eagle_head"]]

    def cycle_and_step(b: int) -> tuple[float, float]:
        target = 32 * o.launch_s_per_layer + o.sample_s_per_row * b
        cycle = (k * (drafters.eagle_draft_pass(s, head, b).seconds + o.launch_s_per_layer
                      + o.draft_fixed_s)
                 + passes.target_pass(s, b, k + 1).seconds + target + o.spec_fixed_s)
        return cycle, passes.target_pass(s, b).seconds + target

    cycle, step = cycle_and_step(1)
    tokens = (373.25 / 158.34) * cycle / step if tokens_per_cycle is None else tokens_per_cycle
    cycle, step = cycle_and_step(batch)
    return tokens, tokens * step / cycle


def series_k_plus_1() -> int:
    return SERIES[EAGLE3].fields["k"] + 1


def test_the_eagle3_calibration_is_sglangs_batch_1_ratio():
    assert validate.calibration_ratio(SERIES[EAGLE3], SERIES) == pytest.approx(373.25 / 158.34)


def test_the_eagle3_prediction_reproduces_the_batch_1_ratio_by_construction():
    series = SERIES[EAGLE3]
    (point,) = series.points
    o = SGLANG
    tokens = validate.eagle_tokens_per_cycle(series, point, o, 373.25 / 158.34)
    batch_1 = validate.Point(point.value, point.reading, 1, point.context, point.extra)
    assert validate.eagle_speedup(series, batch_1, o, tokens) == pytest.approx(373.25 / 158.34)
    assert tokens == pytest.approx(_by_hand(1)[0])


def test_the_eagle3_batch_64_figure_is_priced_as_a_chain_but_not_held_against_the_model():
    """SGLang drafted a tree there, and neither its shape nor its acceptance length is stated:
    reference only (the trees with both are held out, below)."""
    assert EAGLE3 not in {r.id for r in REPORT.series}
    (point,) = SERIES[EAGLE3].points
    tokens, speedup = _by_hand(64)
    assert validate.predict(SERIES[EAGLE3], point, SGLANG, {},
                            inputs=SERIES) == pytest.approx(speedup)
    assert tokens <= series_k_plus_1()  # a chain's ceiling, unlike a tree's


def test_sglang_borrows_vllms_draft_and_cycle_times_but_not_its_step_or_schedule():
    vllm = REPORT.fit.overheads("vllm")
    assert (SGLANG.draft_fixed_s, SGLANG.spec_fixed_s) == (vllm.draft_fixed_s,
                                                           vllm.spec_fixed_s)
    assert SGLANG.step_fixed_s == SGLANG.schedule_fixed_s == 0.0 < vllm.step_fixed_s
    assert "vLLM's (issue 20780) taken" in SGLANG.source


def test_a_calibration_on_a_missing_series_is_named():
    series = SERIES[EAGLE3]
    (point,) = series.points
    others = {k: v for k, v in SERIES.items() if k != "sglang-h100-llama-3.1-8b-plain"}
    with pytest.raises(ValueError, match="calibrated on 'sglang-h100-llama-3.1-8b-plain'"):
        validate.predict(series, point, SGLANG, {}, inputs=others)


TREES = ["sglang-pr4247-llama31-8b-eagle3-trees", "sglang-pr4716-llama33-70b-eagle3-tree"]


@pytest.mark.parametrize("series_id", TREES)
def test_published_tree_figures_are_held_out_and_priced_as_trees(series_id):
    """A tree's tokens/s: the acceptance length the run measured over one SGLang tree cycle
    (steps head passes over topk tokens a row, one verification over the draft tokens)."""
    series = SERIES[series_id]
    (result,) = [r for r in REPORT.series if r.id == series_id]
    assert result.split == "held_out"
    head = drafters.EAGLE_HEADS[series.fields["eagle_head"]]
    for point, priced in zip(series.points, result.points, strict=True):
        tree = point.get("tree", series.fields.get("tree"))
        setting = validate.setting_for(series, point, o=SGLANG)
        cycle = drafters.eagle_tree_cycle_s(setting, head, tree["steps"], tree["topk"],
                                            tree["draft_tokens"], 1)
        assert priced.model == pytest.approx(point.get("acceptance_length") / cycle)


def test_a_tree_costs_its_chain_at_batch_1_and_far_more_once_verification_is_compute_bound():
    setting = passes.Setting(hardware=HARDWARE["h100-sxm"],
                               target=shapes.model("llama-3.1-8b"),
                               draft=shapes.model("llama-3.1-8b"), context=512)
    head = drafters.EAGLE_HEADS["eagle3-llama-3.1-8b"]

    def ratio(batch):
        return (drafters.eagle_tree_cycle_s(setting, head, 5, 8, 64, batch)
                / drafters.eagle_tree_cycle_s(setting, head, 5, 1, 6, batch))

    assert ratio(1) == pytest.approx(1.0, abs=0.05)
    assert ratio(128) > 4.0


def test_the_report_sums_up_the_held_out_series_in_one_line():
    held = [r for r in REPORT.series if r.split == "held_out"]
    line = validate.held_out_summary(REPORT)
    assert line.startswith(f"Held out: {len(held)} series")
    median = sorted(r.median_abs_error for r in held)
    middle = (median[(len(held) - 1) // 2] + median[len(held) // 2]) / 2
    assert f"{middle:.1%}" in line
    assert f"{sum(r.misses for r in held)} above 25%" in line
    assert line in validate.format_report(REPORT)


def test_weight_only_kernels_read_at_the_share_torchaos_runs_give_and_only_gpt_fast_pays_it():
    sources = published.load_all()
    terms = validate.fit(sources).terms
    # by hand: each run's int rate over its bf16 rate is tokens/s x bytes a token, the
    # launch aside (a few per cent of a 7-8B step)
    data = json.loads((REPO / "measurements/published/torchao-quantization-readme.json")
                      .read_text())
    for dtype, share in (("int8", terms.int8_share), ("int4", terms.int4_share)):
        ratios = []
        for series in data["series"]:
            if not series["id"].endswith("-weight-only"):
                continue
            rows = {p["dtype"]: p for p in series["points"]}
            ratios.append(rows[dtype]["value"] * rows[dtype]["bytes_per_linear_weight"]
                          / (rows["bf16"]["value"] * 2.0))
        assert share == pytest.approx(sum(ratios) / len(ratios), rel=0.03)
    assert 0.7 < terms.int8_share < 0.9 and 0.45 < terms.int4_share < 0.6
    fit = validate.fit(sources)
    assert fit.overheads("gpt-fast").int4_share == terms.int4_share
    assert fit.overheads("vllm").int4_share == fit.overheads("sglang").int8_share == 1.0
    # never from gpt-fast's own quantized rows: without torchao there is no share
    without = validate.fit([s for s in sources if s.id != "torchao-quantization-readme"])
    assert without.terms.int8_share == without.terms.int4_share == 1.0


def test_a_weight_only_pass_reads_its_weights_at_the_kernels_share_and_int4_its_scales():
    from engine.analytic.overheads import Overheads

    target = shapes.model("llama-2-7b")
    o = Overheads(int4_share=0.5)
    s = passes.Setting(HARDWARE["a100-80gb"], target, target, "int4", context=0,
                       overheads=o, int4_group=32)
    one = passes.forward_pass(target, s, 1, 1)
    # the half byte and a bf16 scale and zero a group of 32; the input table's one row in bf16
    weights = (target.params - target.input_table) * (0.5 + 4 / 32)
    row = target.width * 2
    assert one.bytes == pytest.approx(weights + row)
    assert one.memory_s == pytest.approx((weights / 0.5 + row) / HARDWARE["a100-80gb"].bandwidth)
    with pytest.raises(ValueError, match="share of bf16's bandwidth"):
        Overheads(int8_share=0)
