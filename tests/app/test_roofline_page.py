"""The "At your batch size" section over HTTP: state in the link, fragments, measured points."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from urllib.parse import parse_qs, parse_qsl

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.roofline import NUMBERS, SLIDER_BATCHES, parse_roofline_state
from engine.analytic import validate
from engine.analytic.break_even import costs
from engine.analytic.default_overheads import fitted
from engine.analytic.machine_overheads import loop_overheads
from engine.analytic.overheads import NONE
from engine.analytic.passes import Setting
from engine.analytic.presets import HARDWARE, PAIRS
from engine.analytic.roofline import roofline
from engine.analytic.timed_costs import timed_costs
from engine.settings import SHIPPED_MEASUREMENTS, Settings

NO_OVERHEADS = ("launch_us_per_layer=0&allreduce_us_per_log2=0&sample_row_overhead_us=0"
                "&spec_overhead_ms=0&spec_row_overhead_us=0&step_overhead_us=0&draft_overhead_us=0")
ACHIEVED = {"bw_share": NUMBERS["bw_share"].default,
            "flops_share": NUMBERS["flops_share"].default,
            # and the overheads fitted to the published measurements at those shares
            "overheads": fitted(NUMBERS["bw_share"].default, NUMBERS["flops_share"].default)}
MACHINE_COSTS = SHIPPED_MEASUREMENTS / "schedule" / "shipped-cpu-costs.json"
CURVE = {"label": "sweep", "hardware": "this machine", "target": "t", "draft": "d", "k": 4,
         "alpha": 0.7, "pair": "shipped", "method": "predicted",
         "points": [{"batch": b, "speedup": s} for b, s in ((1, 1.3), (8, 1.1), (64, 0.8))]}


def figure(html: str, name: str) -> str:
    match = re.search(rf'data-figure="{name}">([^<]*)<', html)
    assert match, f"figure {name} not on the page"
    return match.group(1).strip()


def test_section_is_under_the_slider_model_with_every_control_in_the_get_form(client):
    html = client.get("/").text
    assert html.index('id="results"') < html.index("At your batch size") < html.index(
        'id="live-form"')
    for name in ("hardware", "models", "dtype", "gpus", "context", "batch"):
        assert re.search(rf'name="{name}" form="controls"', html), name
    assert 'id="batch-slider"' in html and "hidden" in html.split('id="batch-slider"')[1][:300]


def test_headline_and_figures_follow_the_link(client):
    html = client.get("/?hardware=a100-80gb&models=llama-70b-1b&gpus=4&context=1024&batch=64"
                      "&alpha=0.8&k=5&batch_k=slider").text
    pair = PAIRS["llama-70b-1b"]
    r = roofline(Setting(HARDWARE["a100-80gb"], pair.target, pair.draft, "bf16", 4, 1024, 0.8,
                         5, **ACHIEVED), 64)
    headline = figure(html, "roofline-headline")
    assert headline.startswith("At batch 64 on 4 × A100 80 GB, speculating k = 5 (the "
                               "slider&#39;s) with Llama 3.2 1B")
    assert f"{r.speedup:.2f}×" in headline
    assert figure(html, "s_b") == f"{r.speedup:.2f}×"
    assert figure(html, "c_b") == f"{r.c:.3f}"
    assert figure(html, "bound") == r.bound


def test_a_state_where_speculation_never_pays(client):
    html = client.get("/?alpha=0.3&c=0.18&hardware=h100-sxm&models=llama-8b-1b&context=0"
                      "&batch=512&batch_k=slider").text
    s = Setting(HARDWARE["h100-sxm"], PAIRS["llama-8b-1b"].target, PAIRS["llama-8b-1b"].draft,
                context=0, alpha=0.3, k=4, **ACHIEVED)
    most = roofline(s, 1).max_batch_that_fits
    here = roofline(s, 512).speedup
    assert here < 1
    assert figure(html, "roofline-headline") == (
        "At batch 512 on one H100 SXM, speculating k = 4 (the slider&#39;s) with Llama 3.2 1B "
        f"costs Llama 3.1 8B throughput: {here:.2f}× plain decoding, and it does not pay at any "
        "batch here. "
        f"On one H100 SXM at context 0 it fits up to batch {most}.")
    assert figure(html, "break_even") == "1"


def test_bad_values_are_clamped_or_defaulted_with_a_notice(client):
    html = client.get("/?batch=99999&gpus=0&hardware=tpu&dtype=&models=gpt").text
    section = html.split('id="roofline"')[1]
    assert "batch=99999 is outside 1–1024; using the maximum 1024." in section
    assert "gpus=0 is outside 1–8" in section
    assert "hardware=&#39;tpu&#39; is not one of" in section
    assert "models=&#39;gpt&#39;" in section
    assert figure(html, "roofline-headline").startswith("At batch 1024 on one H100 SXM")


def test_state_parses_back_from_its_own_items():
    state, notices = parse_roofline_state([("batch", "48"), ("dtype", "fp8")])
    assert notices == []
    again, notices = parse_roofline_state(state.items())
    assert again == state and notices == []
    assert SLIDER_BATCHES[state.slider_index] == 45 or SLIDER_BATCHES[state.slider_index] == 54


def test_fragments_for_htmx(client):
    own = client.get("/?batch=8", headers={"HX-Request": "true", "HX-Target": "roofline"}).text
    assert own.lstrip().startswith('<div id="roofline"') and "<form" not in own
    assert "hx-swap-oob" not in own
    # A slider move re-renders the results alone; the section asks for itself once alpha or k
    # rests (its trigger is in the full page).
    results = client.get("/?alpha=0.9", headers={"HX-Request": "true", "HX-Target": "results"})
    assert 'id="roofline"' not in results.text and "<form" not in results.text
    page = client.get("/").text
    assert re.search(r'hx-trigger="input delay:\d+ms from:#alpha, input delay:\d+ms from:#k', page)


def test_use_these_costs_hands_c_v_for_every_k_and_the_step_time_to_the_slider_model(client):
    html = client.get("/?models=llama-8b-1b&context=0&batch=1024&alpha=0.8&prompt=hi"
                      f"&batch_k=slider&{NO_OVERHEADS}").text
    href = re.search(r'id="use-costs" href="/\?([^"]+)"', html).group(1).replace("&amp;", "&")
    q = {k: v[0] for k, v in parse_qs(href).items()}
    pair = PAIRS["llama-8b-1b"]
    s = Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, context=0, alpha=0.8,
                **(ACHIEVED | {"overheads": NONE}))
    r = roofline(s, 1024)
    assert float(q["c"]) == round(r.c, 2) and q["v"] == "3"  # v(B) = 5, past the slider
    assert f"v(B) = {r.v:.2f} is past the v slider&#39;s 3: the slider shows 3" in html
    assert float(q["step_ms"]) == pytest.approx(r.t_step_ms, rel=1e-5)
    held = [float(x) for x in q["vk"].split(",")]
    assert len(held) == 16 and q["vk_batch"] == "1024"
    # each cycle costs what the section says: k c(B) + v(B, k), with c at the slider's step
    for k in range(1, 17):
        c, v = costs(s, 1024, k)
        assert k * float(q["c"]) + held[k - 1] == pytest.approx(k * c + v, rel=1e-5)
    assert (q["alpha"], q["batch"], q["models"], q["prompt"]) == ("0.8", "1024", "llama-8b-1b",
                                                                   "hi")
    assert len(parse_qs(href)["c"]) == 1  # replaced, not repeated
    followed = client.get(f"/?{href}").text
    assert re.search(r'id="v" name="v" [^>]*value="3"', followed)
    assert figure(followed, "best_k_b") == figure(followed, "best_k") == "none: do not speculate"
    notice = re.search(r'data-figure="held-notice">(.*?)</div>', followed, re.S).group(1)
    assert "Costs from the batch section at batch 1024 on one H100 SXM, Llama 3.1 8B with " \
        "Llama 3.2 1B, bf16, context 0" in " ".join(notice.split())


def test_the_slider_model_and_the_section_agree_at_every_k_while_it_holds_the_costs(client):
    for k in (1, 2, 4, 7, 12, 16):
        base = (f"/?models=llama-8b-1b&hardware=h100-sxm&context=512&batch=512&k={k}"
                "&batch_k=slider")
        href = re.search(r'id="use-costs" href="/\?([^"]+)"',
                         client.get(base).text).group(1).replace("&amp;", "&")
        html = client.get(f"/?{href}").text
        pair = PAIRS["llama-8b-1b"]
        r = roofline(Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, context=512, k=k,
                             **ACHIEVED), 512)
        assert (figure(html, "speedup"), figure(html, "s_b")) == (f"{r.speedup:.3f}×",
                                                                  f"{r.speedup:.2f}×")
        assert figure(html, "tok_s") == figure(html, "tok_s_seq")
        assert figure(html, "tok_s_batch") == figure(html, "tok_s_total")
        assert figure(html, "best_k").split(" (")[0] == figure(html, "best_k_b").split(" (")[0]


def test_a_malformed_held_cost_list_is_dropped_with_a_notice(client):
    html = client.get("/?vk=1,2,3&vk_batch=4").text
    assert "vk (the batch section&#39;s v for each k) was ignored: it has 3 values" in html
    assert 'data-figure="held-notice"' not in html


def test_measured_points_show_for_their_pair_and_bad_files_give_a_notice(tmp_path):
    (tmp_path / "sweep.json").write_text(json.dumps(CURVE))
    (tmp_path / "broken.json").write_text('{"label": ')
    settings = Settings(load_models=False, measurements_dir=tmp_path)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        shipped = c.get("/?models=shipped&hardware=this-machine")
        other = c.get("/?models=llama-8b-1b").text
    assert shipped.status_code == 200
    assert shipped.text.count('class="measured measured-0"') == 3
    assert "Measured (predicted): sweep; this machine, k = 4" in shipped.text
    assert 'class="measured ' not in other
    assert "broken.json was skipped" in other


POLICIES = ("k = 2", "k = 4", "schedule", None, "k = 8", "k = 1", "k = 3")


def test_every_measured_curve_has_its_own_marker_and_a_legend_naming_its_policy(tmp_path):
    for i, policy in enumerate(POLICIES):  # more curves than marker shapes or colours
        curve = CURVE | {"label": f"curve {i}", "method": "end-to-end",
                         "points": [{"batch": 2 ** j, "speedup": 1 + i / 10 + j / 100}
                                    for j in range(i + 1)]}
        (tmp_path / f"c{i}.json").write_text(json.dumps(curve | ({"policy": policy}
                                                                 if policy else {})))
    settings = Settings(load_models=False, measurements_dir=tmp_path)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        html = c.get("/?models=shipped&hardware=this-machine").text
    groups = re.findall(r'<g class="measured-series" data-policy="([^"]*)" data-shape="([^"]*)"'
                        r' data-colour="(\d)">(.*?)</g>', html, re.S)
    names = [policy or f"curve {i}" for i, policy in enumerate(POLICIES)]
    assert [g[0] for g in groups] == names
    assert len({(g[1], g[2]) for g in groups}) == len(POLICIES)  # no two look alike
    for i, (name, _, colour, body) in enumerate(groups):
        assert body.count(f'<path class="measured measured-{colour}"') == i + 1
        assert body.count(f"<title>{name}: B = ") == i + 1
    legend = re.findall(r'<span class="measured-legend" data-policy="([^"]*)" data-shape='
                        r'"([^"]*)" data-colour="(\d)">(.*?)</span>', html, re.S)
    assert [(n, s, c) for n, s, c, _ in legend] == [g[:3] for g in groups]
    for i, ((*_, body), policy) in enumerate(zip(legend, POLICIES, strict=True)):
        text = " ".join(re.sub(r"<[^>]+>", "", body).split())
        assert text.startswith(f"{policy}: Measured (end-to-end): curve {i};" if policy
                               else f"Measured (end-to-end): curve {i};")


def test_a_pair_that_does_not_fit_says_so_and_where_it_would(client):
    html = client.get("/?models=llama-70b-1b&gpus=1&context=8192&batch=32").text
    pair = PAIRS["llama-70b-1b"]
    four = roofline(Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, gpus=4,
                            context=8192, **ACHIEVED), 32)
    assert figure(html, "memory-headline").startswith(
        "Llama 3.1 70B in bf16 does not fit on one H100 SXM at context 8192 (")
    assert (f"; on 4 × H100 SXM at context 8192 it fits up to batch {four.max_batch_that_fits}."
            in figure(html, "memory-headline"))
    assert 'class="rl-figures no-fit"' in html and 'data-figure="no-fit-label"' in html
    assert 'class="no-fit-zone"' in html and "does not fit in memory at any batch" in html


def test_a_pair_that_fits_says_how_far_and_what_the_draft_costs(client):
    html = client.get("/?models=llama-70b-1b&gpus=8&context=8192&batch=32").text
    pair = PAIRS["llama-70b-1b"]
    r = roofline(Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, gpus=8,
                         context=8192, **ACHIEVED), 32)
    assert 'data-figure="memory-headline"' not in html and "rl-figures no-fit" not in html
    assert figure(html, "roofline-headline").endswith(
        f"On 8 × H100 SXM at context 8192 it fits up to batch {r.max_batch_that_fits}.")
    fewer = r.max_batch_without_draft - r.max_batch_that_fits
    assert figure(html, "capacity") == (
        f"up to {r.max_batch_that_fits}; the draft&#39;s weights and KV cache cost {fewer} "
        "sequences at context 8192")
    assert f"memory limit {r.max_batch_that_fits}" in html  # the chart's shaded edge


def test_past_the_limit_the_figures_are_greyed_and_labelled(client):
    html = client.get("/?models=llama-70b-1b&gpus=8&context=8192&batch=1024").text
    assert "At context 8192, Llama 3.1 70B with Llama 3.2 1B in bf16 does not fit at batch 1024" \
        in figure(html, "memory-headline")
    assert "Does not fit in memory at batch 1024" in figure(html, "no-fit-label")


def test_the_table_shows_memory_compute_and_communication_for_each_pass(client):
    html = client.get("/?models=qwen-7b-0.5b&gpus=8&context=512&batch=1&latency_us=20"
                      "&batch_k=slider").text
    pair = PAIRS["qwen-7b-0.5b"]
    r = roofline(Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, gpus=8, context=512,
                         latency_s=20e-6, **ACHIEVED), 1)
    for key, p in (("target", r.target_pass), ("verify", r.verify_pass), ("draft", r.draft_pass)):
        assert figure(html, f"{key}_memory") == f"{p.memory_ms:.3g} ms"
        assert figure(html, f"{key}_compute") == f"{p.compute_ms:.3g} ms"
        assert figure(html, f"{key}_comm") == f"{p.communication_ms:.3g} ms"
    assert figure(html, "t_draft") == f"{r.t_draft_ms:.3g} ms"
    assert "two all-reduces a layer over 8 GPUs at 450 GB/s each way + 20.0 µs each" in html


def test_the_draft_on_one_gpu_is_an_option_labelled_as_not_what_vllm_deploys(client):
    html = client.get("/?models=qwen-7b-0.5b&gpus=8&batch=1&draft=one-gpu").text
    assert "one GPU (not vLLM 0.32)" in html
    assert "The draft is whole on one GPU: not what vLLM 0.32 deploys" in html
    assert figure(html, "draft_comm") == "0 ms"
    sharded = client.get("/?models=qwen-7b-0.5b&gpus=8&batch=1").text
    assert "The draft is whole on one GPU" not in sharded
    assert 'value="sharded" selected' in sharded


def test_the_table_says_the_rates_are_achieved_and_this_machine_is_measured(client):
    html = client.get("/?hardware=a100-80gb&bw_share=0.5").text
    assert "Rates achieved, not peak: 1.02 of 2.04 TB/s (50.0%) and 250 of 312 TFLOP/s (80.1%)" \
        in figure(html, "achieved")
    mine = client.get("/?hardware=this-machine&models=shipped").text
    assert "fitted to measured passes, so already achieved (share 1)" in figure(mine, "achieved")


def test_chart_labels_are_placed_apart_in_every_preset():
    import itertools

    from app.roofline import _overlaps, batch_chart

    checked = 0
    for models, hw, gpus, context, batch in itertools.product(
            PAIRS, ("h100-sxm", "l4", "a100-80gb"), (1, 8), (0, 512, 8192), (1, 64, 512, 1024)):
        pair = PAIRS[models]
        s = Setting(HARDWARE[hw], pair.target, pair.draft, gpus=gpus, context=context,
                    **ACHIEVED)
        chart = batch_chart(s, roofline(s, batch), [])
        boxes = [label.box() for label in chart.labels]
        assert len(boxes) == 1 + sum(x is not None for x in (chart.ridge_x, chart.break_even_x,
                                                             chart.no_fit_x))
        for a, b in itertools.combinations(boxes, 2):
            assert not _overlaps(a, b), (models, hw, gpus, context, batch)
        for x0, y0, x1, y1 in boxes:
            assert chart.left <= x0 and x1 <= chart.right and chart.top <= y0 <= y1 <= chart.bottom
        checked += 1
    assert checked == len(PAIRS) * 3 * 2 * 3 * 4


def test_each_line_label_sits_by_its_own_line_in_every_preset():
    # When nothing fits, the memory limit is the plot's left edge; the break-even label once
    # went there too, some 200 units from its own line, beside the wrong marker.
    import itertools

    from app.roofline import batch_chart

    for models, hw, gpus, context, batch in itertools.product(
            PAIRS, ("h100-sxm", "l4", "a100-80gb"), (1, 8), (0, 512, 8192), (1, 64, 512, 1024)):
        pair = PAIRS[models]
        s = Setting(HARDWARE[hw], pair.target, pair.draft, gpus=gpus, context=context,
                    **ACHIEVED)
        chart = batch_chart(s, roofline(s, batch), [])
        line_x = {"ridge": chart.ridge_x, "break-even": chart.break_even_x,
                  "memory": chart.no_fit_x}
        for label in chart.labels:
            if label.kind == "current":
                continue
            x0, _, x1, _ = label.box()
            x = line_x[label.kind]
            apart = 0.0 if x0 <= x <= x1 else min(abs(x - x0), abs(x - x1))
            assert apart <= 32, (label.text, models, hw, gpus, context, batch)  # of 440

def test_prompt_lookup_is_priced_without_draft_passes_and_breaks_even_later(client):
    from engine.analytic.break_even import lookup_break_even_batch, lookup_speedup_at

    # on the ideal roofline: the fitted overheads leave lookup no break-even below 1024
    html = client.get("/?hardware=h100-sxm&models=llama-8b-1b&context=512&batch=64"
                      f"&alpha=0.6&k=4&preset=ngram&pi=0.3&c=0&batch_k=slider&{NO_OVERHEADS}"
                      ).text
    pair = PAIRS["llama-8b-1b"]
    s = Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, "bf16", 1, 512, 0.6, 4,
                **(ACHIEVED | {"overheads": NONE}))
    r = roofline(s, 64)
    ngram = lookup_break_even_batch(s)
    assert ngram is not None and r.break_even_batch is not None and ngram > r.break_even_batch
    assert figure(html, "break_even_lookup") == str(ngram)
    assert figure(html, "break_even") == str(r.break_even_batch)
    assert figure(html, "s_b_lookup") == f"{lookup_speedup_at(s, 64, 0.3):.2f}×"
    line = figure(html, "roofline-lookup").replace("&#39;", "'")
    assert f"π = 0.30 of cycles) gives {lookup_speedup_at(s, 64, 0.3):.2f}× at batch 64" in line
    assert f"from batch {ngram} on it costs throughput" in line
    assert f"{ngram / r.break_even_batch:.1f}× the draft model's batch" in line


def test_the_lookup_line_uses_the_default_pi_with_the_draft_model_preset(client):
    html = client.get("/").text
    assert "π = 0.25 of cycles" in figure(html, "roofline-lookup")


# ---- the headline and the plan agree ----


def plan_rows(html: str) -> list[tuple[int, int, int]]:
    return [tuple(int(x) for x in r) for r in
            re.findall(r'<tr data-lo="(\d+)" data-hi="(\d+)" data-k="(\d+)"', html)]


@pytest.mark.parametrize("setting", [
    "models=llama-8b-1b&context=512",  # the default: k = 3, then 2, up to 256
    "models=llama-70b-1b&gpus=8&context=8192",  # memory stops the plan at 146
    "models=llama-70b-1b&gpus=8&context=512&alpha=0.55",  # the plan turns off at 510
])
@pytest.mark.parametrize("batch", [1, 32, 146, 194, 256, 400, 600, 1000])
def test_the_headline_names_the_plans_k_and_never_contradicts_the_plan(client, setting, batch):
    html = client.get(f"/?{setting}&batch={batch}&max_num_seqs=1024").text
    headline = figure(html, "roofline-headline").replace("&#39;", "'")
    rows = plan_rows(html)
    k = next((k for lo, hi, k in rows if lo <= batch <= hi), None)
    if k is None:  # past memory: the plan has no row, the headline says what fits
        assert "fits up to batch" in headline
        return
    if k > 0:
        assert f"the plan speculates k = {k} with" in headline
        assert "costs" not in headline.split(";")[0]
        assert "does not speculate" not in headline.split(";")[0]
    else:
        assert "the plan does not speculate (k = 0)" in headline
        assert "faster" not in headline
    # one answer: where the headline says speculation stops paying, the plan's verdict does
    verdict = figure(html, "plan-verdict")
    pays = re.search(r"speculation pays up to batch (\d+)", headline)
    if pays:
        assert verdict.startswith(f"Speculation pays at batches 1–{pays.group(1)} ")
    # where memory cuts the plan, its last batches may fit only without a draft's KV: the
    # batch from which it is off is the one of a last k = 0 range that memory does not cut
    off = next((lo for lo, hi, k in rows if k == 0 and hi == 1024), None)
    shown = figure(html, "break_even")
    if off is not None:  # the break-even shown is the batch from which the plan is off
        assert shown == str(off) and (f"from batch {off} on the plan does not speculate"
                                      in headline or k == 0)
    assert figure(html, "rl_k").startswith("k = ")


def test_a_fixed_k_is_named_and_its_own_break_even_shown(client):
    html = client.get(f"/?batch=200&k=4&batch_k=slider&max_num_seqs=1024&{NO_OVERHEADS}").text
    headline = figure(html, "roofline-headline").replace("&#39;", "'")
    pair = PAIRS["llama-8b-1b"]
    r = roofline(Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, context=512, k=4,
                         **(ACHIEVED | {"overheads": NONE})), 200)
    assert "speculating k = 4 (the slider's)" in headline
    assert f"from batch {r.break_even_batch} on it costs throughput" in headline
    assert figure(html, "break_even") == str(r.break_even_batch)
    # the plan below still speculates there: the headline said whose k it was
    planned = [k for lo, hi, k in plan_rows(html) if lo <= r.break_even_batch <= hi]
    assert len(planned) == 1 and planned[0] > 0


def test_the_prompt_lookup_line_stops_where_memory_does(client):
    html = client.get("/?models=llama-70b-1b&gpus=8&context=8192&batch=32").text
    line = figure(html, "roofline-lookup")
    assert line.endswith("it pays at every batch that fits.") and "1024" not in line


def test_use_these_costs_from_a_batch_that_does_not_fit_says_so(client):
    html = client.get("/?models=llama-70b-1b&gpus=8&context=8192&batch=512").text
    assert "(batch 512 does not fit in memory: these are the costs of a machine that could " \
        "hold it)" in html
    assert 'data-figure="use-costs-no-fit"' not in client.get(
        "/?models=llama-70b-1b&gpus=8&context=8192&batch=32").text


def test_a_label_stays_beside_its_own_line_when_lines_crowd():
    """Three lines 30 px apart: the break-even label, on the middle one, cannot sit beside
    its line without crossing a neighbour's; it still sits against its own line (crossing the
    other, with its halo), never against the ridge's, where it would read as the ridge's."""
    from app.charts import Frame
    from app.roofline import place_labels

    frame = Frame(400, 200, 40, 380, 10, 180)
    labels = place_labels(frame, [("ridge", "ridge B × T = 295", 200.0),
                                  ("break-even", "break-even 178", 230.0),
                                  ("memory", "fits up to 260", 260.0)],
                          ("batch 8", 60.0, 100.0))
    mine = next(label for label in labels if label.kind == "break-even")
    assert abs(mine.x - 230.0) <= 4.0 + 1e-9
    assert abs(mine.x - 200.0) > 4.0 + 1e-9


def test_the_eagle_heads_c_sits_beside_the_draft_models_for_a_target_that_has_one(client):
    """The cost model's c(B) for an EAGLE head of the target (a preset from its config), beside
    the draft model's; a target with no head preset shows none."""
    from markupsafe import escape

    from engine.analytic.break_even import step_s
    from engine.analytic.drafters import EAGLE_HEADS, eagle_draft_pass
    from engine.analytic.overheads import launch_s

    html = client.get("/?hardware=h100-sxm&models=llama-8b-1b&context=512&batch=32").text
    s = Setting(HARDWARE["h100-sxm"], PAIRS["llama-8b-1b"].target, PAIRS["llama-8b-1b"].draft,
                context=512, **ACHIEVED)
    head = EAGLE_HEADS["eagle3-llama-3.1-8b"]
    # in plain steps; the head's pass launches its one layer
    c = (eagle_draft_pass(s, head, 32).seconds + launch_s(s.overheads, 1)) / step_s(s, 32)
    assert figure(html, "c_b_eagle") == f"{c:.3f}"
    assert f'title="{escape(head.label)}">c(B), EAGLE-3 head</dt>' in html
    assert 'data-figure="c_b_eagle"' not in client.get(
        "/?hardware=h100-sxm&models=qwen-7b-0.5b&batch=32").text


def test_the_overhead_inputs_show_the_fitted_defaults_and_the_pass_table_its_overheads(client):
    html = client.get("/?hardware=a100-80gb&gpus=8&context=4000&batch=32&batch_k=slider").text
    o = ACHIEVED["overheads"]
    for name, value in (("launch_us_per_layer", o.launch_s_per_layer * 1e6),
                        ("spec_overhead_ms", o.spec_fixed_s * 1e3),
                        ("spec_row_overhead_us", o.spec_per_row_s * 1e6)):
        box = re.search(rf'<input type="number" id="rl-{name}"[^>]*>', html, re.S).group(0)
        assert f'placeholder="{value:.4g}"' in box and 'value=""' in box
    pair = PAIRS["llama-8b-1b"]
    r = roofline(Setting(HARDWARE["a100-80gb"], pair.target, pair.draft, gpus=8, context=4000,
                         **ACHIEVED), 32)
    assert '<th scope="col">overhead</th>' in html
    assert figure(html, "target_overhead") == f"{r.target_pass.overhead_ms:.3g} ms"
    assert figure(html, "verify_overhead") == f"{r.verify_pass.overhead_ms:.3g} ms"
    assert figure(html, "s_b") == f"{r.speedup:.2f}×"
    assert "vLLM issue 49548" in html


def test_typed_overheads_stay_in_the_link_and_price_the_section(client):
    q = "batch_k=slider&batch=16&launch_us_per_layer=2&spec_row_overhead_us=12.5"
    state, notices = parse_roofline_state(parse_qsl(q))
    assert notices == [] and (state.launch_us_per_layer, state.spec_row_overhead_us) == (2, 12.5)
    assert state.sample_row_overhead_us is None and state.spec_overhead_ms is None
    assert "launch_us_per_layer=2&" in state.query() + "&"
    assert "spec_overhead_ms" not in state.query()  # blank: the fitted default
    html = client.get(f"/?{q}").text
    o = ACHIEVED["overheads"]
    pair = PAIRS["llama-8b-1b"]
    r = roofline(Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, context=512, **(
        ACHIEVED | {"overheads": replace(o, launch_s_per_layer=2e-6, spec_per_row_s=12.5e-6)})),
        16)
    assert figure(html, "s_b") == f"{r.speedup:.2f}×"
    assert re.search(r'id="rl-launch_us_per_layer"[^>]*value="2"', html, re.S)


def test_a_bad_overhead_in_the_link_is_clamped_or_defaulted_with_a_notice():
    state, notices = parse_roofline_state(parse_qsl(
        "launch_us_per_layer=-3&spec_overhead_ms=abc&spec_row_overhead_us=99999"))
    assert state.launch_us_per_layer == 0 and state.spec_overhead_ms is None
    assert state.spec_row_overhead_us == 10000
    assert notices == ["launch_us_per_layer=-3 is outside 0–10000; using the minimum 0.",
                       "spec_overhead_ms='abc' is not a number; using the fitted default.",
                       "spec_row_overhead_us=99999 is outside 0–10000; using the maximum "
                       "10000."]


def test_this_machine_is_the_machine_and_the_overheads_of_the_costs_file(client):
    data = json.loads(MACHINE_COSTS.read_text())
    html = client.get("/?hardware=this-machine&models=shipped&dtype=fp32&batch=8").text
    pair = PAIRS["shipped"]
    s = Setting(HARDWARE["this-machine"], pair.target, pair.draft, "fp32", context=512)
    fit = loop_overheads(timed_costs(data["passes"], data["loop"]), s)
    assert fit.overheads.spec_per_row_s > 0 and fit.overheads.launch_s_per_layer > 0
    for name, value in (("spec_row_overhead_us", fit.overheads.spec_per_row_s * 1e6),
                        ("launch_us_per_layer", fit.overheads.launch_s_per_layer * 1e6)):
        box = re.search(rf'<input type="number" id="rl-{name}"[^>]*>', html).group(0)
        assert f'placeholder="{value:.4g}"' in box
    assert "from the costs file" in html and "fitted with its reads and arithmetic" in html


def test_without_a_costs_file_this_machine_has_no_overheads(tmp_path):
    settings = Settings(load_models=False, machine_costs=tmp_path / "none.json")
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as c:
        data = c.get("/api/roofline?hardware=this-machine&models=shipped&dtype=fp32").json()
    assert data["overheads"]["spec_overhead_ms"] == data["overheads"]["launch_us_per_layer"] == 0
    assert data["t_step_ms"] == data["t_target_ms"]


def test_the_sections_speedup_shows_its_interval_and_where_it_comes_from(client):
    html = client.get("/?batch=16&batch_k=slider").text
    band = validate.default_intervals()["speedup"]
    s_b = float(figure(html, "s_b").rstrip("×"))
    shown = figure(html, "s_b_interval")
    low, high = (float(x) for x in re.findall(r"[0-9]+\.[0-9]+", shown)[:2])
    assert low == pytest.approx(s_b * band.low, abs=0.01)
    assert high == pytest.approx(s_b * band.high, abs=0.01)
    assert "held-out speedup points" in html


def test_a_link_with_the_old_overhead_names_opens_with_their_new_meaning_said():
    """Before the overheads had causes a link said pass_overhead_ms (a fixed time a pass) and
    pass_row_overhead_us (a time a row a pass): now a launch time a layer of the target and
    the sampler's time a row a step, rewritten into the link with a notice each."""
    state, notices = parse_roofline_state(parse_qsl(
        "models=llama-8b-1b&pass_overhead_ms=0.32&pass_row_overhead_us=7"))
    assert state.launch_us_per_layer == pytest.approx(10.0)  # 320 us over 32 layers
    assert state.sample_row_overhead_us == 7
    assert "launch_us_per_layer=10&" in state.query() + "&"
    assert "pass_overhead_ms" not in state.query()
    assert notices[0].startswith("pass_overhead_ms=0.32 is now launch_us_per_layer=10")
    assert notices[1].startswith("pass_row_overhead_us=7 is now sample_row_overhead_us=7")
    # a new name given beside an old one wins
    state, notices = parse_roofline_state(parse_qsl(
        "pass_overhead_ms=0.32&launch_us_per_layer=2"))
    assert state.launch_us_per_layer == 2 and notices == []


def test_the_engine_that_serves_is_a_choice_in_the_link_and_prices_the_section(client):
    html = client.get("/?batch_k=slider&batch=16&engine=gpt-fast").text
    assert re.search(r'<option value="gpt-fast" selected>gpt-fast</option>', html)
    pair = PAIRS["llama-8b-1b"]
    r = roofline(Setting(HARDWARE["h100-sxm"], pair.target, pair.draft, context=512, **(
        ACHIEVED | {"overheads": fitted(ACHIEVED["bw_share"],
                                         ACHIEVED["flops_share"], "gpt-fast")})), 16)
    assert figure(html, "s_b") == f"{r.speedup:.2f}×"
    assert figure(client.get("/?batch_k=slider&batch=16").text, "s_b") != figure(html, "s_b")
    state, notices = parse_roofline_state(parse_qsl("engine=gpt-fast"))
    assert notices == [] and "engine=gpt-fast" in state.query()
    assert "engine" not in parse_roofline_state(parse_qsl("engine=vllm"))[0].query()  # default
    assert ("engine=&#39;tgi&#39; is not one of vllm, sglang, gpt-fast, specscope; using vllm."
            in client.get("/?engine=tgi").text)
