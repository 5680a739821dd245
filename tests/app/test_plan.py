"""GET /api/plan and the batch section's plan: the engine's schedule for the section's settings,
vLLM's config beside it, bounded inputs, and the links that plan from a measured alpha."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qsl

import pytest

from app.params import SLIDERS
from engine.analytic.default_overheads import fitted
from engine.analytic.passes import Setting
from engine.analytic.presets import ACHIEVED_BANDWIDTH, ACHIEVED_FLOPS, HARDWARE, PAIRS
from engine.planner import schedule
from engine.planner.costs import memory_fits, roofline_cycle, spec_step_k0
from engine.planner.vllm_config import Deployment, speculative_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def expected(alpha=0.7, hardware="h100-sxm", pair="llama-8b-1b", dtype="bf16", gpus=1,
             context=512, k_max=8, max_num_seqs=256):
    p = PAIRS[pair]
    s = achieved(Setting(HARDWARE[hardware], p.target, p.draft, dtype, gpus, context))
    return schedule.plan(schedule.single(alpha), roofline_cycle(s), k_max, max_num_seqs,
                         fits=memory_fits(s), k0_overhead=spec_step_k0(s).overhead())


def achieved(s: Setting, bw_share: float = ACHIEVED_BANDWIDTH) -> Setting:
    """``s`` at the page's achieved shares, with the overheads fitted at them."""
    return replace(s, bw_share=bw_share, flops_share=ACHIEVED_FLOPS,
                   overheads=fitted(bw_share, ACHIEVED_FLOPS))


NO_OVERHEADS = ("launch_us_per_layer=0&allreduce_us_per_log2=0&sample_row_overhead_us=0"
                "&spec_overhead_ms=0&spec_row_overhead_us=0&step_overhead_us=0&draft_overhead_us=0")


def test_defaults_answer_the_engine_plan(client):
    data = client.get("/api/plan").json()
    plan = expected()
    assert data["plan"] == json.loads(json.dumps(schedule.plan_json(plan)))
    assert "49548" in data["k0"]["source"]  # k = 0 ranges cost what a schedule adds
    # at context 512 the KV cache's reads keep every batch to 256 bandwidth-bound: speculation
    # pays at every batch, and the interval, straddling 1, says to measure first
    assert not plan.weighted and data["band"]["hi"] == plan.largest_batch == 256
    assert data["verdict"].startswith("Speculation pays at every batch that fits, 1–256 ")
    assert data["decision"] == "configure" and data["configure"]


def test_without_traffic_the_answer_is_the_band_not_an_average_over_batches(client):
    """Where speculation stops paying inside the plan (no KV cache to read: context 0), the
    answer is the band, not an average over every batch, which no traffic given justifies."""
    data = client.get("/api/plan?context=0").json()
    plan = expected(context=0)
    band = data["band"]
    assert band["lo"] == 1 and 1 < band["hi"] < plan.largest_batch
    assert data["verdict"].startswith(f"Speculation pays at batches 1–{band['hi']} ")
    assert f"costs from {band['hi'] + 1} on" in data["verdict"]
    assert data["speculative_config"] is not None


def test_without_overheads_the_plan_deploys_its_config(client):
    data = client.get(f"/api/plan?{NO_OVERHEADS}").json()
    p = PAIRS["llama-8b-1b"]
    s = Setting(HARDWARE["h100-sxm"], p.target, p.draft, "bf16", 1, 512,
                bw_share=ACHIEVED_BANDWIDTH, flops_share=ACHIEVED_FLOPS)
    plan = schedule.plan(schedule.single(0.7), roofline_cycle(s), 8, 256,
                         fits=memory_fits(s), k0_overhead=spec_step_k0(s).overhead())
    assert data["plan"] == json.loads(json.dumps(schedule.plan_json(plan)))
    assert data["speculative_config"] == speculative_config(
        plan, Deployment("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.2-1B"))
    assert data["speculative_config"]["draft_sample_method"] == "probabilistic"
    assert data["target"] == "meta-llama/Llama-3.1-8B"
    assert data["engine_args"]["max_num_seqs"] == plan.largest_batch
    assert data["engine_args"]["speculative_config"] == data["speculative_config"]
    assert data["python"].startswith("from vllm import LLM\n")
    assert data["advice"] is None
    assert data["verdict"].startswith("Speculation pays at every batch that fits, 1–")


def test_parameters_change_the_plan(client):
    q = ("hardware=l4&pair=qwen-7b-0.5b&dtype=fp8&gpus=2&context=4096&alpha=0.8&k_max=5"
         "&max_num_seqs=64")
    data = client.get(f"/api/plan?{q}").json()
    plan = expected(0.8, "l4", "qwen-7b-0.5b", "fp8", 2, 4096, 5, 64)
    assert [[r["lo"], r["hi"], r["k"]] for r in data["plan"]["ranges"]] == plan.vllm_ranges()
    assert data["plan"]["ranges"][-1]["hi"] == 64 and data["plan"]["k_max"] == 5


def test_edited_hardware_changes_the_plan(client):
    slow = client.get("/api/plan?tflops=5&max_num_seqs=512").json()["plan"]["ranges"]
    fast = client.get("/api/plan?max_num_seqs=512").json()["plan"]["ranges"]
    assert slow != fast and slow[-1]["k"] == 0  # compute-starved: speculation turns off


def test_where_nothing_pays_there_is_no_config_and_the_answer_says_so(client):
    data = client.get("/api/plan?alpha=0").json()
    assert data["speculative_config"] is None and data["python"] is None
    assert data["verdict"].startswith("Do not configure speculation")
    assert not data["configure"] and data["plan"]["gain_over_off"] <= 1
    # a k = 0 range costs what vLLM issue 49548 measured, so nothing here is free
    free = client.get("/api/plan?alpha=0&k0_overhead=0").json()
    assert [[r["lo"], r["hi"], r["k"]] for r in free["plan"]["ranges"]] == [[1, 256, 0]]
    assert "do not speculate here" in free["advice"]


@pytest.mark.parametrize("query, field", [("k_max=0", "k_max"), ("k_max=17", "k_max"),
                                          ("max_num_seqs=0", "max_num_seqs"),
                                          ("max_num_seqs=5000", "max_num_seqs"),
                                          ("alpha=2", "alpha"), ("pair=gpt5", "pair")])
def test_out_of_range_inputs_are_a_readable_422(client, query, field):
    response = client.get(f"/api/plan?{query}")
    assert response.status_code == 422
    assert field in response.json()["message"]


# ---- the page ----


def plan_html(page: str) -> str:
    start = page.index('<div class="plan" id="plan"')
    return page[start:page.index("</details>", start)]


def test_the_batch_section_shows_the_plan_for_its_settings_and_alpha(client):
    page = client.get("/?alpha=0.8&hardware=a100-80gb&models=qwen-7b-0.5b&context=1024"
                      "&k_max=6&max_num_seqs=128").text
    section = plan_html(page)
    plan = expected(0.8, "a100-80gb", "qwen-7b-0.5b", "bf16", 1, 1024, 6, 128)
    rows = re.findall(r'<tr data-lo="(\d+)" data-hi="(\d+)" data-k="(\d+)">', section)
    assert [[int(x) for x in r] for r in rows] == plan.vllm_ranges()
    config = speculative_config(plan, Deployment("Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-0.5B"))
    copied = re.search(r'data-copy-text="([^"]*)"', section).group(1)
    assert json.loads(html.unescape(copied))["speculative_config"] == config
    assert 'href="/api/plan?hardware=a100-80gb&amp;models=qwen-7b-0.5b' in section
    assert 'value="6"' in section and 'value="128"' in section


def test_the_plan_inputs_are_in_the_link_and_bad_ones_clamped_with_a_notice(client):
    response = client.get("/?k_max=40&max_num_seqs=abc", headers={
        "HX-Request": "true", "HX-Target": "roofline"})
    assert "k_max=16" in response.headers["HX-Replace-Url"]
    assert "max_num_seqs=256" in response.headers["HX-Replace-Url"]
    assert "k_max=40 is outside 1–16" in response.text
    assert "max_num_seqs=&#39;abc&#39; is not a number" in response.text


def test_where_nothing_pays_the_section_says_do_not_speculate(client):
    page = client.get("/?alpha=0&k0_overhead=0").text
    assert "k is 0 at every batch: do not speculate here" in page
    assert "Copy vLLM config" not in page


def test_a_calibration_offers_a_plan_at_its_alpha(client):
    before = (FIXTURES / "vllm_metrics_before.txt").read_text()
    after = (FIXTURES / "vllm_metrics_after.txt").read_text()
    page = client.post("/calibrate", data={"before": before, "after": after}).text
    alpha = re.search(r'<tr data-alpha="([0-9.]+)"', page).group(1)
    assert f'href="/?alpha={float(alpha):.2f}#plan">Plan a schedule from this</a>' in page


# ---- a traffic mix ----

MIX = [schedule.Domain("code", 3, 0.95), schedule.Domain("chat", 1, 0.3)]


def test_a_mix_plans_with_every_domains_alpha_and_names_the_one_that_limits_it(client):
    data = client.get("/api/plan?mix=code:3:0.95&mix=chat:1:0.3&context=128").json()
    p = PAIRS["llama-8b-1b"]
    s = achieved(Setting(HARDWARE["h100-sxm"], p.target, p.draft, "bf16", 1, 128))
    plan = schedule.plan(MIX, roofline_cycle(s), 8, 256, fits=memory_fits(s),
                         k0_overhead=spec_step_k0(s).overhead())
    assert data["plan"] == json.loads(json.dumps(schedule.plan_json(plan)))
    assert data["plan"]["limiting"] == "chat"
    mean = client.get("/api/plan?alpha=0.7875&context=128").json()  # 0.75 x 0.95 + 0.25 x 0.3
    assert mean["plan"]["ranges"] != data["plan"]["ranges"]


def test_a_mix_entry_that_does_not_parse_is_a_422_that_shows_the_format(client):
    response = client.get("/api/plan?mix=code:3:1.5")
    assert response.status_code == 422
    assert "NAME:WEIGHT:ALPHA" in response.json()["message"]
    zero = client.get("/api/plan?mix=a:0:0.5&mix=b:0:0.9").json()
    assert [d["weight"] for d in zero["plan"]["domains"]] == [1.0, 1.0]
    assert any("weighted equally" in n for n in zero["notices"])


def test_a_mix_in_the_link_shows_its_domains_and_rides_along_with_the_form(client):
    response = client.get("/?mix=code:3:0.95&mix=chat:1:0.3&mix=oops&context=128",
                          headers={"HX-Request": "true", "HX-Target": "roofline"})
    assert "mix=code%3A3%3A0.95&mix=chat%3A1%3A0.3" in response.headers["HX-Replace-Url"]
    text = response.text
    assert '<tr data-domain="chat"><th scope="row">chat <span class="muted">(limits the plan)' \
        in text
    assert text.count('type="hidden" name="mix" form="controls"') == 2
    assert "&#39;oops&#39; is not NAME:WEIGHT:ALPHA" in text
    assert 'id="plan-drop-mix"' in text and "mix=" not in re.search(
        r'href="([^"]*)" id="plan-drop-mix"', text).group(1)


@pytest.mark.parametrize("query", ["alpha=0.62&hardware=l4&context=4096&k_max=5",
                                   "mix=code:3:0.95&mix=chat:1:0.3&models=qwen-7b-0.5b"])
def test_the_command_the_section_shows_prints_the_same_plan(client, capsys, query):
    import shlex

    from engine.cli import main

    page = client.get(f"/?{query}").text
    section = page[page.index('<div class="plan" id="plan"'):]
    command = html.unescape(re.search(r'<code data-figure="plan-command">(specscope plan [^<]*)'
                                      r"</code>", section).group(1))
    assert main([*shlex.split(command)[1:], "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["plan"]["ranges"]
    rows = re.findall(r'<tr data-lo="(\d+)" data-hi="(\d+)" data-k="(\d+)">', section)
    assert [[r["lo"], r["hi"], r["k"]] for r in printed] == [[int(x) for x in r] for r in rows]


# ---- one plan, one set of names ----

PAGE_ONLY = {"batch", "batch_k"}  # the roofline's own batch, and which k the section follows
CLI_ONLY = {"from_probe", "from_metrics", "temperature", "costs", "target", "draft", "json",
            "command", "help", "contexts"}  # contexts: several plans, the command's own view


def test_the_page_the_api_and_the_command_line_take_the_same_names(client):
    import argparse

    from engine.cli import plan_parser

    schema = client.get("/openapi.json").json()["paths"]
    api = {p["name"] for p in schema["/api/plan"]["get"]["parameters"]
           if not p.get("deprecated")}
    roofline_api = {p["name"] for p in schema["/api/roofline"]["get"]["parameters"]
                    if not p.get("deprecated")}
    sub = next(a for a in plan_parser()._actions if isinstance(a, argparse._SubParsersAction))
    cli = {a.dest for a in sub.choices["plan"]._actions} - CLI_ONLY
    assert api == cli, (api ^ cli)
    assert roofline_api - {"batch", "k"} <= api
    page = client.get("/?mix=code:1:0.9", headers={"HX-Request": "true",
                                                   "HX-Target": "roofline"})
    link = {k for k, _ in parse_qsl(page.headers["HX-Replace-Url"].split("?", 1)[1])}
    shared = link - PAGE_ONLY - set(SLIDERS) - {"prompt", "vk", "vk_batch", "vk_on"}
    plan_names = {"hardware", "models", "dtype", "gpus", "context", "usable", "latency_us",
                  "bw_share", "flops_share", "draft_placement", "k_max", "max_num_seqs",
                  "data_parallel", "mix"}
    assert plan_names <= shared and plan_names <= api


@pytest.mark.parametrize("query", [
    # the case: 8B / 1B on one H100 at alpha 0.7, a bandwidth share of 0.5, on the
    # ideal roofline (no overheads)
    f"alpha=0.7&bw_share=0.5&{NO_OVERHEADS}",
    # overheads given: the command and the API carry them
    "alpha=0.8&launch_us_per_layer=0.2&sample_row_overhead_us=3&spec_overhead_ms=0.1"
    "&spec_row_overhead_us=5",
    "hardware=h200&models=llama-70b-1b&gpus=2&context=4096&alpha=0.66&bw_share=0.55"
    "&flops_share=0.6&latency_us=25&usable=0.8&draft_placement=one-gpu&k_max=6"
    "&max_num_seqs=512&draft_sample=greedy&k0_overhead=0.1&batch_mix=1%3D3%2C64%3D1",
    "models=qwen-7b-0.5b&gpus=4&usable=0.5&latency_us=0&data_parallel=2&alpha=0.8",
    # the slider's acceptance by position prices the plan, and the command carries it
    "positions=0.85,0.5,0.25,0.1&max_num_seqs=16",
])
def test_the_command_on_the_page_reproduces_the_pages_plan_exactly(client, capsys, query):
    import shlex

    from engine.cli import main

    page = client.get(f"/?{query}").text
    section = page[page.index('<div class="plan" id="plan"'):]
    command = html.unescape(re.search(r'<code data-figure="plan-command">(specscope plan [^<]*)'
                                      r"</code>", section).group(1))
    assert main([*shlex.split(command)[1:], "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    api = client.get(html.unescape(re.search(r'<a href="(/api/plan\?[^"]*)">This plan as JSON',
                                             section).group(1))).json()
    for key in ("plan", "verdict", "speculative_config", "engine_args", "refused", "k0",
                "draft_sample"):
        assert printed[key] == api[key], key
    rows = re.findall(r'<tr data-lo="(\d+)" data-hi="(\d+)" data-k="(\d+)">', section)
    assert [[r["lo"], r["hi"], r["k"]] for r in printed["plan"]["ranges"]] == [
        [int(x) for x in r] for r in rows]
    if "bw_share=0.5&" in query + "&":
        assert [[r["lo"], r["hi"], r["k"]] for r in printed["plan"]["ranges"]] == [
            [1, 248, 3], [249, 256, 2]]


def test_old_api_names_still_work_and_the_new_name_wins(client):
    old = client.get("/api/plan?pair=llama-70b-1b&gpus=8&bandwidth_fraction=0.5"
                     "&usable_fraction=0.8&link_latency_us=30&draft_on_one_gpu=true").json()
    new = client.get("/api/plan?models=llama-70b-1b&gpus=8&bw_share=0.5&usable=0.8"
                     "&latency_us=30&draft_placement=one-gpu").json()
    assert old == new and new["refused"] is not None
    both = client.get("/api/plan?bw_share=0.5&bandwidth_fraction=0.6").json()
    assert both["plan"] == client.get("/api/plan?bw_share=0.5").json()["plan"]


def test_a_greedy_probes_mix_link_plans_for_greedy_drafting(client):
    from app.plan import mix_hrefs

    rows = [{"temperature": 1.0, "domain": "code", "prompts": 3, "alpha_counted": 0.8}]
    (_, plain), = mix_hrefs(rows)
    (_, greedy), = mix_hrefs(rows, "greedy")
    assert "draft_sample" not in plain and greedy.endswith("&draft_sample=greedy#plan")
    page = client.get(f'{greedy.removesuffix("#plan")}&{NO_OVERHEADS}').text
    config = re.search(r'data-copy-text="([^"]*)"', page).group(1)
    assert json.loads(html.unescape(config))["speculative_config"][
        "draft_sample_method"] == "greedy"


def test_the_api_plans_for_an_eagle_head_or_self_speculation(client):
    eagle = client.get(f"/api/plan?drafter=eagle&alpha=0.8&{NO_OVERHEADS}").json()
    assert eagle["method"] == eagle["speculative_config"]["method"] == "eagle3"
    assert eagle["speculative_config"]["model"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert eagle["engine_args"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    self_spec = client.get("/api/plan?drafter=self-spec&gpus=8&context=32000&alpha=0.81"
                           "&draft_kv_budget=512").json()
    assert self_spec["method"] == "self-spec" and self_spec["speculative_config"] is None
    assert "does not serve self-speculation" in self_spec["refused"]
    missing = client.get("/api/plan?drafter=eagle&models=qwen-7b-0.5b")
    assert missing.status_code == 422
    assert "no EAGLE head preset drafts for Qwen2.5 7B" in missing.json()["message"]
    for bad in ("drafter=lookahead", "draft_kv_budget=0", "eagle_head=nope", "positions=lots",
                "positions=1.5", "tree=17,4,8"):
        assert client.get(f"/api/plan?{bad}").status_code == 422
    rising = client.get("/api/plan?positions=0.4,0.6&alpha=0.65").json()  # the schema's words
    assert any("cannot rise" in n and "alpha 0.65" in n for n in rising["notices"])


def test_the_api_says_alpha_was_given_and_the_tpot_at_every_batch(client):
    data = client.get(f"/api/plan?alpha=0.7&{NO_OVERHEADS}").json()  # a config to deploy
    assert data["alpha_source"]["origin"] == "hand" and data["alpha_source"]["warning"] is None
    assert data["alpha_source"]["where"] == "alpha"
    rows = data["latency"]
    assert [r["batch"] for r in rows] == list(range(1, data["plan"]["largest_batch"] + 1))
    for r in rows:
        assert r["plan_ms"] > 0 and r["off_ms"] > 0
    for r in data["plan"]["ranges"]:  # TPOT off over as planned is the range's speedup
        gains = [row["off_ms"] / row["plan_ms"] for row in rows[r["lo"] - 1:r["hi"]]]
        assert [min(gains), max(gains)] == pytest.approx(r["speedup"])


def test_the_pages_plan_says_where_alpha_came_from(client):
    page = client.get("/?alpha=0.7").text
    source = re.search(r'data-figure="plan-alpha-source">([^<]*)<', page).group(1)
    assert html.unescape(source).startswith("Alpha given by hand (the slider model's α)")
    mixed = client.get("/?mix=code:1:0.9").text
    assert "Alpha given by hand (the link&#39;s traffic mix)" in mixed


def test_the_api_answers_for_a_request_rate_and_refuses_two_traffics(client):
    data = client.get("/api/plan?request_rate=50&output_tokens=256").json()
    assert data["verdict"].startswith("At 50 requests/s of 256 tokens")
    assert data["traffic"]["plan"]["mean_batch"] < data["traffic"]["off"]["mean_batch"]
    both = client.get("/api/plan?request_rate=2&batch_mix=1%3D1")
    assert both.status_code == 422 and "give the traffic once" in both.json()["message"]


def test_the_page_plans_for_a_request_rate_in_its_link(client):
    page = client.get("/?request_rate=50&output_tokens=256").text
    api = client.get("/api/plan?request_rate=50&output_tokens=256").json()
    assert api["verdict"] in html.unescape(page)  # one answer, on the page and from the API
    assert 'name="request_rate" form="controls" value="50"' in page
    assert "request_rate=50&amp;output_tokens=256" in page  # the link carries the traffic
    bad = client.get("/?request_rate=fast").text
    assert "request_rate must be a number of requests a second" in html.unescape(bad)
    both = client.get("/?request_rate=4&batch_mix=1%3D1").text
    assert "both give the traffic; the batch mix is used" in both


@pytest.mark.parametrize("query", ["", "context=0&batch=512", "models=llama-70b-1b&gpus=8"
                                   "&context=8192&batch=64", "alpha=0.3&batch=256"])
def test_the_headline_the_stats_and_the_plan_give_one_answer(client, query):
    """The section's headline, its "best k at this batch" and the plan's verdict agree: where
    the headline speculates at this batch, the stats name a k that pays and the verdict does
    not tell the user to serve the target alone; where the verdict says not to configure, the
    headline does not speculate."""
    page = html.unescape(client.get(f"/?{query}").text)
    headline = re.search(r'data-figure="roofline-headline"[^>]*>(.*?)</', page, re.S).group(1)
    best = re.search(r'data-figure="best_k_b">([^<]*)<', page).group(1)
    verdict = re.search(r'data-figure="plan-verdict">([^<]*)<', page).group(1)
    speculates = "the plan speculates k =" in headline
    if speculates and "faster per token" in headline:
        assert not best.startswith("none"), (headline, best)
        assert not verdict.startswith("Do not configure"), (headline, verdict)
    if verdict.startswith("Do not configure"):
        assert not speculates or "no k pays here" in headline, (headline, verdict)


def test_the_plans_heading_names_the_engine_it_prices_for(client):
    assert ">A schedule for vLLM: k at each batch size<" in client.get("/").text
    assert ">A schedule for SGLang: k at each batch size<" in client.get("/?engine=sglang").text


def test_the_schema_says_a_head_drafts_only_for_its_target_as_shipped(client):
    # The request: every value is in its range; the refusal is the rule the drafter's
    # description states (a head trained on a checkpoint cannot draft for another shape).
    parameters = client.get("/openapi.json").json()["paths"]["/api/plan"]["get"]["parameters"]
    by_name = {p["name"]: p for p in parameters}
    assert "with any target_* edit" in by_name["drafter"]["description"]
    heads = next(s for s in by_name["target_heads"]["schema"]["anyOf"] if s["type"] == "integer")
    assert heads["maximum"] >= 12703
    r = client.get("/api/plan?drafter=eagle&target_heads=12703&draft_params_b=17223.9")
    assert r.status_code == 422
    assert r.json()["message"].endswith("(target_heads made the target another model; leave "
                                        "them out, or plan with drafter=model)")
    # The same edits with the pair's own draft model are answered.
    assert client.get("/api/plan?target_heads=12703&draft_params_b=17223.9").status_code == 200
