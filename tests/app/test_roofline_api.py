"""GET /api/roofline: the engine's figures as JSON, presets in the schema, readable 422s."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.roofline import NUMBERS
from engine.analytic import validate
from engine.analytic.default_overheads import fitted
from engine.analytic.overheads import Overheads
from engine.analytic.passes import Setting
from engine.analytic.presets import HARDWARE, PAIRS
from engine.analytic.roofline import roofline
from engine.settings import Settings

# The page's and the API's defaults: achieved shares of the datasheet
ACHIEVED = {"bw_share": NUMBERS["bw_share"].default,
            "flops_share": NUMBERS["flops_share"].default,
            # and the overheads fitted to the published measurements at those shares
            "overheads": fitted(NUMBERS["bw_share"].default, NUMBERS["flops_share"].default)}
KEYS = {"t_target_ms", "t_verify_ms", "t_draft_ms", "c", "v", "speedup", "tok_s_base",
        "tok_s_spec", "break_even_batch", "ridge_tokens", "bound", "best_k", "curve"}


def test_defaults_answer_every_figure_from_the_engine(client):
    data = client.get("/api/roofline").json()
    assert set(data) >= KEYS
    pair = PAIRS["llama-8b-1b"]
    expected = roofline(Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, context=512,
                                **ACHIEVED), 32)
    assert data["speedup"] == pytest.approx(expected.speedup)
    assert data["break_even_batch"] == expected.break_even_batch
    assert [p["batch"] for p in data["curve"]] == [2**i for i in range(11)]
    assert set(data["curve"][0]) == {"batch", "speedup", "c", "v", "fits"}


def test_parameters_change_the_answer(client):
    q = "hardware=l4&pair=qwen-7b-0.5b&dtype=fp8&gpus=2&context=4096&batch=8&alpha=0.8&k=5"
    data = client.get(f"/api/roofline?{q}").json()
    pair = PAIRS["qwen-7b-0.5b"]
    s = Setting(HARDWARE["l4"], pair.target, pair.draft, "fp8", 2, 4096, 0.8, 5, **ACHIEVED)
    assert data["speedup"] == pytest.approx(roofline(s, 8).speedup)
    assert data["bound"] in ("memory", "compute")


def test_speculation_that_pays_everywhere_has_a_null_break_even(client):
    data = client.get("/api/roofline?context=131072&alpha=0.8").json()
    assert data["break_even_batch"] is None
    assert data["curve"][-1]["speedup"] > 1


@pytest.mark.parametrize(("query", "named"), [
    ("hardware=tpu", "hardware: Input should be 'h100-sxm', 'h200'"),
    ("pair=gpt", "pair: Input should be 'llama-70b-1b'"),
    ("dtype=int2", "dtype: Input should be 'bf16', 'fp8', 'int8', 'int4' or 'fp32'"),
    ("batch=0", "batch must be a whole number from 1 to 1024"),
    ("batch=2000", "batch must be a whole number from 1 to 1024"),
    ("gpus=9", "gpus must be a whole number from 1 to 8"),
    ("context=lots", "context must be a whole number from 0 to 131072"),
    ("alpha=2", "alpha must be a number from 0 to 1"),
    ("hardware=custom", "hardware: Input should be 'h100-sxm'"),
    ("bandwidth_tb_s=0", "bandwidth_tb_s must be a number from 1e-06 to 1000000 (got '0')"),
    ("target_params_b=1e300", "target_params_b must be a number from 1e-06 to 100000 "
                              "(got '1e300')"),
    ("target_layers=0.5", "target_layers must be a whole number from 1 to 100000"),
])
def test_bad_parameters_get_422_naming_the_parameter_and_what_is_allowed(client, query, named):
    response = client.get(f"/api/roofline?{query}")
    assert response.status_code == 422
    assert named in response.json()["message"]


def test_hardware_figures_and_shapes_can_replace_the_presets(client):
    shape = "params_b={}&layers=32&heads=32&kv_heads=8&head_dim=128"
    q = ("bandwidth_tb_s=1&tflops=100&bandwidth_fraction=1&flops_fraction=1&"
         + "&".join(f"target_{part}" for part in shape.format(8).split("&"))
         + "&" + "&".join(f"draft_{part}" for part in shape.format(1).split("&")))
    data = client.get(f"/api/roofline?{q}&context=0&batch=1&spec_overhead_ms=0"
                      "&spec_row_overhead_us=0&launch_us_per_layer=0&allreduce_us_per_log2=0&sample_row_overhead_us=0"
                      "&step_overhead_us=0&draft_overhead_us=0").json()
    assert data["c"] == pytest.approx(1 / 8)
    assert data["ridge_tokens"] == pytest.approx(100)  # 100e12 * 2 / (2 * 1e12)
    assert data["hardware"]["label"].endswith("(edited)")
    assert data["target"]["params"] == 8e9


def test_one_replaced_field_keeps_the_rest_of_the_preset(client):
    ideal = ("&launch_us_per_layer=0&allreduce_us_per_log2=0&sample_row_overhead_us=0"
             "&spec_overhead_ms=0&spec_row_overhead_us=0&step_overhead_us=0"
             "&draft_overhead_us=0")  # c: the ratio of the weights alone
    preset = client.get(f"/api/roofline?pair=llama-8b-1b&context=0{ideal}").json()
    edited = client.get(f"/api/roofline?pair=llama-8b-1b&context=0&draft_params_b=3{ideal}"
                        ).json()
    assert edited["target"] == preset["target"]
    assert edited["draft"]["params"] == 3e9
    # the 8B reads its untied input table's rows only; the 3B given by hand is read whole
    table = 128_256 * 4096
    assert edited["c"] == pytest.approx(3e9 / (preset["target"]["params"] - table), rel=1e-4)
    assert edited["hardware"] == preset["hardware"]


def test_presets_are_enums_in_the_openapi_schema(client):
    schema = client.get("/openapi.json").json()
    enums = {name: schema["components"]["schemas"][name]["enum"]
             for name in ("HardwareName", "PairName", "Dtype")}
    assert enums["HardwareName"] == [*HARDWARE]
    assert enums["PairName"] == [*PAIRS]
    assert enums["Dtype"] == ["bf16", "fp8", "int8", "int4", "fp32"]


def test_without_a_costs_file_this_machine_takes_its_figures_from_a_measured_fit(tmp_path):
    curve = {"label": "x", "hardware": "x", "target": "t", "draft": "d", "k": 4, "alpha": 0.7,
             "points": [{"batch": 1, "speedup": 1.2}],
             "fit": {"bandwidth_gb_s": 7.0, "gflops": 70.0}}
    (tmp_path / "fit.json").write_text(json.dumps(curve))
    settings = Settings(load_models=False, measurements_dir=tmp_path,
                        machine_costs=tmp_path / "none.json")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        data = client.get("/api/roofline?hardware=this-machine&pair=shipped").json()
    assert data["hardware"]["bandwidth_tb_s"] == pytest.approx(0.007)
    assert data["hardware"]["tflops"] == pytest.approx(0.07)


def test_memory_capacity_is_answered_with_the_engines_figures(client):
    one = client.get("/api/roofline?pair=llama-70b-1b&gpus=1&context=8192&batch=32").json()
    assert one["fits"] is False and one["max_batch_that_fits"] is None
    assert one["memory_gb_available"] == pytest.approx(80 * 0.9)
    assert all(not p["fits"] for p in one["curve"])
    eight = client.get("/api/roofline?pair=llama-70b-1b&gpus=8&context=8192&batch=32").json()
    pair = PAIRS["llama-70b-1b"]
    s = Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, gpus=8, context=8192, **ACHIEVED)
    expected = roofline(s, 32)
    assert eight["fits"] is True
    assert eight["max_batch_that_fits"] == expected.max_batch_that_fits
    assert eight["memory_gb_per_gpu"] == pytest.approx(expected.memory_gb_per_gpu)
    most = eight["max_batch_that_fits"]
    assert [p["fits"] for p in eight["curve"]] == [p["batch"] <= most for p in eight["curve"]]
    half = client.get("/api/roofline?pair=llama-70b-1b&gpus=8&context=8192&usable_fraction=0.5")
    assert half.json()["max_batch_that_fits"] < most


def test_a_usable_fraction_out_of_range_is_refused(client):
    response = client.get("/api/roofline?usable_fraction=1.5")
    assert response.status_code == 422
    assert "usable_fraction must be a number from 0.1 to 1 (got '1.5')" in \
        response.json()["message"]


def test_tensor_parallelism_reports_three_times_per_pass(client):
    data = client.get("/api/roofline?pair=qwen-7b-0.5b&gpus=8&batch=1&link_latency_us=5").json()
    pair = PAIRS["qwen-7b-0.5b"]
    r = roofline(Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, gpus=8, context=512,
                         latency_s=5e-6, **ACHIEVED), 1)
    assert data["draft_pass"]["communication_ms"] == pytest.approx(
        r.draft_pass.communication_ms)
    assert data["draft_pass"]["bound"] == "communication"
    assert data["hardware"]["link_gb_s"] == 450
    one = client.get("/api/roofline?pair=qwen-7b-0.5b&gpus=8&batch=1&draft_on_one_gpu=true")
    assert one.json()["draft_pass"] == {**one.json()["draft_pass"], "communication_ms": 0,
                                        "gpus": 1}
    slow = client.get("/api/roofline?pair=qwen-7b-0.5b&gpus=8&batch=1&link_gb_s=4").json()
    assert slow["t_target_ms"] > data["t_target_ms"]


def test_rates_are_achieved_shares_of_the_datasheet_and_can_be_set(client):
    data = client.get("/api/roofline?hardware=a100-80gb").json()
    assert data["hardware"]["bandwidth_tb_s"] == pytest.approx(2.039 * 0.685)  # gpt-fast's 1.397
    assert data["hardware"]["peak_bandwidth_tb_s"] == pytest.approx(2.039)
    assert data["hardware"]["tflops"] == pytest.approx(312 * 0.801)
    assert data["hardware"]["achieved"] == {"bandwidth": 0.685, "flops": 0.801}
    peak = client.get("/api/roofline?hardware=a100-80gb&bandwidth_fraction=1&flops_fraction=1")
    assert peak.json()["t_target_ms"] == pytest.approx(data["t_target_ms"] * 0.685)
    assert client.get("/api/roofline?flops_fraction=0").status_code == 422


def test_this_machine_is_already_achieved(client):
    data = client.get("/api/roofline?hardware=this-machine&pair=shipped&bandwidth_fraction=0.5")
    assert data.json()["hardware"]["achieved"] == {"bandwidth": 1.0, "flops": 1.0}
    assert data.json()["hardware"]["bandwidth_tb_s"] == pytest.approx(
        data.json()["hardware"]["peak_bandwidth_tb_s"])


OVERHEAD_QUERY = ("launch_us_per_layer=1.5&sample_row_overhead_us=20&spec_overhead_ms=0.25"
                  "&spec_row_overhead_us=4&step_overhead_us=0&draft_overhead_us=0")


def test_the_answer_carries_the_overheads_it_priced_with(client):
    data = client.get("/api/roofline").json()
    o = ACHIEVED["overheads"]
    assert data["overheads"] == {
        "launch_us_per_layer": pytest.approx(o.launch_s_per_layer * 1e6),
        "allreduce_us_per_log2": pytest.approx(o.allreduce_s_per_log2 * 1e6),
        "sample_row_overhead_us": pytest.approx(o.sample_s_per_row * 1e6),
        "step_overhead_us": pytest.approx(o.step_fixed_s * 1e6),
        "draft_overhead_us": pytest.approx(o.draft_fixed_s * 1e6),
        "spec_overhead_ms": pytest.approx(o.spec_fixed_s * 1e3),
        "spec_row_overhead_us": pytest.approx(o.spec_per_row_s * 1e6),
        "schedule_overhead_ms": pytest.approx(o.schedule_fixed_s * 1e3),
        "schedule_row_overhead_us": pytest.approx(o.schedule_per_row_s * 1e6),
        "source": o.source}
    assert "vLLM's step, draft-pass and speculative-cycle times" in o.source  # the default engine
    # the 8B's 32 layers launch on the target's pass, the 1B's 16 on the draft's, which also
    # pays vLLM's fixed time a draft pass
    assert data["launch_ms"] == pytest.approx(32 * o.launch_s_per_layer * 1e3)
    assert data["draft_launch_ms"] == pytest.approx(
        (16 * o.launch_s_per_layer + o.draft_fixed_s) * 1e3)
    assert data["t_step_ms"] == pytest.approx(
        data["t_target_ms"] + data["launch_ms"] + data["sample_ms"] + data["step_overhead_ms"])
    assert data["verify_pass"]["overhead_ms"] == pytest.approx(
        data["launch_ms"] + data["sample_ms"] + data["step_overhead_ms"]
        + data["spec_overhead_ms"])
    assert data["draft_pass"]["overhead_ms"] == pytest.approx(data["draft_launch_ms"])


def test_overheads_given_in_the_query_replace_the_fitted_ones(client):
    data = client.get(f"/api/roofline?batch=64&{OVERHEAD_QUERY}").json()
    pair = PAIRS["llama-8b-1b"]
    given = Overheads(1.5e-6, 20e-6, 0.25e-3, 4e-6)
    expected = roofline(Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, context=512,
                                **(ACHIEVED | {"overheads": given})), 64)
    assert data["speedup"] == pytest.approx(expected.speedup)
    assert data["c"] == pytest.approx(expected.c) and data["v"] == pytest.approx(expected.v)
    assert data["launch_ms"] == pytest.approx(32 * 1.5e-3)
    assert data["sample_ms"] == pytest.approx(20e-3 * 64)
    assert data["overheads"]["source"].startswith("given: launch_us_per_layer=1.5")
    # one given, the others stay the fitted defaults
    one = client.get("/api/roofline?spec_overhead_ms=0").json()["overheads"]
    assert one["spec_overhead_ms"] == 0
    assert one["spec_row_overhead_us"] == pytest.approx(
        ACHIEVED["overheads"].spec_per_row_s * 1e6)


@pytest.mark.parametrize(("query", "says"), [
    ("launch_us_per_layer=-1",
     "launch_us_per_layer must be a number from 0 to 10000 (got '-1')"),
    ("spec_row_overhead_us=1e9", "spec_row_overhead_us must be a number from 0 to 10000"),
    ("spec_overhead_ms=lots", "spec_overhead_ms must be a number from 0 to 100 (got 'lots')"),
    ("sample_row_overhead_us=nan", "sample_row_overhead_us must be a number from 0 to 10000"),
])
def test_a_bad_overhead_is_a_422_that_says_what_it_must_be(client, query, says):
    for route in ("/api/roofline", "/api/plan"):
        response = client.get(f"{route}?{query}")
        assert response.status_code == 422
        assert says in response.json()["message"]


def test_the_speedup_carries_its_interval_from_held_out_errors(client):
    data = client.get("/api/roofline?batch=16").json()
    band = validate.default_intervals()["speedup"]
    interval = data["speedup_interval"]
    assert interval["low"] == pytest.approx(data["speedup"] * band.low)
    assert interval["high"] == pytest.approx(data["speedup"] * band.high)
    assert interval["level"] == 0.8 and interval["n"] == band.n
    assert f"{band.inside} of {band.n}" in interval["source"]


def test_the_engine_that_serves_prices_the_setting(client):
    """One name everywhere: engine=vllm|sglang|gpt-fast|specscope, vLLM by default."""
    answers = {e: client.get(f"/api/roofline?engine={e}&batch=1").json()
               for e in ("vllm", "sglang", "gpt-fast", "specscope")}
    assert client.get("/api/roofline?batch=1").json() == answers["vllm"]
    assert answers["gpt-fast"]["overheads"]["step_overhead_us"] == 0
    assert answers["gpt-fast"]["overheads"]["draft_overhead_us"] == 0
    assert answers["vllm"]["overheads"]["step_overhead_us"] > 0
    # the host time a draft pass and a cycle (vLLM's; SGLang borrows them) make speculation
    # pay less at batch 1 than gpt-fast's compiled loop
    assert max(answers["vllm"]["speedup"], answers["sglang"]["speedup"]) < answers["gpt-fast"][
        "speedup"]
    bad = client.get("/api/roofline?engine=tgi")
    assert bad.status_code == 422 and "vllm" in bad.text
